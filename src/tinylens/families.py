"""The one registry of the workflow's families: for each, where its code, rules, scripts and captions live, the
metrics files its summary writes (and the rule that writes each), the documents the comparison table reads of
it, and what of its outputs DVC versions. The findings (:mod:`tinylens.findings`), the comparison's sources and
the rules (``rules/common.smk``) read it; ``tests/test_families.py`` holds ``dvc.yaml``'s outputs, the rules'
script paths and the families' folders to it. Adding a family is adding one :class:`Family` here
(docs/adding-an-analysis-family.md). Free of torch and of every other module of the project: the ground floor.

Every path is relative to a run's folder, ``results/<preset>/``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Family:
    """One family (one section of the findings).

    ``key`` names its folder in ``src/tinylens/``, ``scripts/`` and ``report/`` and its target rule;
    ``title`` heads its section of the findings; ``module`` is the module whose ``findings(documents)``
    writes its sentences; ``metrics`` maps the names of the documents those sentences read to (path, the
    rule that writes it); ``rules`` are its files under ``rules/`` (``rules/<name>.smk``); ``outputs`` what
    DVC versions of it (folders and files); ``comparison`` the documents the comparison table reads of it,
    by name (``{original}`` in a path is the original seed)."""

    key: str
    title: str
    module: str
    metrics: Mapping[str, tuple[str, str]]
    rules: tuple[str, ...]
    outputs: tuple[str, ...]
    comparison: Mapping[str, tuple[str, str]] = field(default_factory=dict)

    def paths(self) -> dict[str, str]:
        """The metrics files by document name."""
        return {name: path for name, (path, _) in self.metrics.items()}


def _family(key: str, title: str, metrics: str, rule: str, **more) -> Family:
    """A family laid out as most are: ``tinylens.<key>.summary``, ``rules/<key>.smk``, its folder and its one
    metrics file ``metrics/<metrics>.json`` versioned by DVC."""
    path = f"metrics/{metrics}.json"
    return Family(key, title, f"tinylens.{key}.summary", {metrics: (path, rule)}, more.pop("rules", (key,)),
                  more.pop("outputs", (key, path)), **more)


#: The families, in method.md's order (the core first, the comparison last).
FAMILIES: tuple[Family, ...] = (
    Family(
        "core", "The core reproduction (method.md §0-6)", "tinylens.core.summary",
        {"training": ("metrics/training.json", "training_summary"),
         "hellinger": ("metrics/hellinger.json", "hellinger_summary")},
        rules=("corpus", "train", "sample", "strings", "activations", "search", "approx"),
        outputs=("data", "models", "samples", "strings", "activations", "search", "approx", "evaluation",
                 "case_studies", "figures", "metrics/corpus.json", "metrics/training.json", "metrics/hellinger.json",
                 "metrics/hellinger_corpus.json", "metrics/hellinger_heldout.json", "metrics/hellinger_paper.json",
                 "metrics/search_verification.json", "metrics/headline.json"),
        comparison={
            "training": ("metrics/training.json", "training_summary"),
            "original_model": ("models/seed{original}/metrics.json", "train_model"),
            "verification": ("metrics/search_verification.json", "verify_search"),
            "paper_prompts": ("metrics/hellinger_paper.json", "evaluate"),
            "corpus": ("metrics/hellinger_corpus.json", "evaluate"),
            "heldout": ("metrics/hellinger_heldout.json", "evaluate"),
            "case_studies": ("case_studies/summary.json", "case_studies"),
        }),
    _family("supporting", "Supporting analyses (method.md §7)", "supporting", "supporting_metrics",
            comparison={"supporting": ("metrics/supporting.json", "supporting_metrics")}),
    _family("dynamics", "Training dynamics (method.md §8)", "dynamics", "dynamics_summary"),
    _family("phase_change", "The induction-head phase change (method.md §8b)", "phase_change",
            "phase_change_summary"),
    _family("circuits", "Composition between heads (method.md §9)", "circuits", "circuits_summary"),
    _family("attention", "Attention dynamics (method.md §10)", "attention", "attention_summary"),
    _family("superposition", "Superposition in toy models (method.md §11)", "superposition",
            "superposition_summary"),
    Family("comparison", "The published numbers beside ours (method.md §12)", "tinylens.comparison",
           {"comparison": ("metrics/paper_comparison.json", "paper_comparison")}, rules=("comparison",),
           outputs=("comparison", "metrics/paper_comparison.json")),
)

#: The sections of an external model's findings (``results/<preset>/external/<model>/findings.md``, rule
#: external_findings): the families its rules run, with their modules' sentences, and the checkpoints' integrity
#: and induction-head onset (tinylens.phase_change.onset); paths under ``results/<preset>/external/<model>/``.
EXTERNAL_FAMILIES: tuple[Family, ...] = (
    Family("onset", "The checkpoints and the induction-head onset (method.md §8b, §13)", "tinylens.phase_change.onset",
           {"dynamics": ("metrics/dynamics.json", "external_dynamics_summary")}, rules=("external",), outputs=()),
    Family("dynamics", "Training dynamics (method.md §8)", "tinylens.dynamics.summary",
           {"dynamics": ("metrics/dynamics.json", "external_dynamics_summary")}, rules=("external",), outputs=()),
    Family("circuits", "Composition between heads (method.md §9)", "tinylens.circuits.summary",
           {"circuits": ("metrics/circuits.json", "external_circuits_summary")}, rules=("external",), outputs=()),
)

#: The steps that read every family, with their folders in ``scripts/`` and ``rules/``: the run's findings
#: in words and the external models (not part of ``rule all``).
ENTRY_POINTS: Mapping[str, tuple[str, ...]] = {"findings": ("findings",), "external": ("external",)}

#: Outputs of the run as a whole that DVC versions besides the families': the findings in words. (And the
#: run's headline, outside results/<preset>/: :data:`tinylens.comparison.HEADLINE`.)
RUN_OUTPUTS: tuple[str, ...] = ("findings.md",)


def family(key: str) -> Family:
    """The family named ``key``."""
    for f in FAMILIES:
        if f.key == key:
            return f
    raise KeyError(f"no family {key!r}; the families are {[f.key for f in FAMILIES]}")


def folder_of_rules_file(stem: str) -> str:
    """The family (or entry point) whose folder under ``scripts/`` holds the scripts of ``rules/<stem>.smk``."""
    owners = {name: f.key for f in FAMILIES for name in f.rules} | {
        name: key for key, names in ENTRY_POINTS.items() for name in names}
    if stem not in owners:
        raise KeyError(f"rules/{stem}.smk belongs to no family: name it in a Family's rules (tinylens.families)")
    return owners[stem]


def comparison_documents(original_seed: int) -> dict[str, tuple[str, str]]:
    """Every document the comparison table reads: name -> (path, the rule that writes it)."""
    return {name: (path.format(original=original_seed), rule)
            for f in FAMILIES for name, (path, rule) in f.comparison.items()}
