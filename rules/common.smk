# Shared by every stage: the active preset, output paths, wildcard constraints, resources.
from tinylens.config import active_preset, all_seeds, seed_train_settings, variant_train_settings
from tinylens.core.strings import MODES as PROMPT_MODES, TUNED_WITH, TUNING_MODES
from tinylens.model_config import MODEL_FILES, VARIANT_OPTIONS, VECTOR_KINDS, file_form
from tinylens.resources import STRING_BYTES, STRING_VALUE_BYTES, per_row, table_rows, width_factor
from tinylens.families import FAMILIES, comparison_documents, family

PRESET = config["preset"]
SETTINGS = active_preset(config)
SEEDS = all_seeds(config)


def results(path):
    """Every output lives under results/<preset>/, so presets never overwrite each other."""
    return f"results/{PRESET}/{path}"


wildcard_constraints:
    seed=r"\d+",


TRAIN = SETTINGS["train"]
ANALYSIS = SETTINGS["analysis"]
CONTROLS = config["controls"]  # the controls of the core claim (method.md §6b, rules/controls.smk)
ORIGINAL, *ALTERNATES = SEEDS  # the alternates this preset trains (presets.<name>.alternate_seeds)
MODES = list(PROMPT_MODES)  # defined once, in tinylens.core.strings
TUNED_MODES = list(TUNING_MODES)  # the modes with tuning prompts; the paper mode uses the corpus mode's values
N_LAYER = SETTINGS["model"]["n_layer"]
PROMPT_SETS = [f"prompts_{mode}" for mode in MODES]


scattergather:
    search=ANALYSIS["search_shards"],


wildcard_constraints:
    mode="|".join(MODES),
    set="|".join(["strings", *PROMPT_SETS]),


def activations(seed, set_name):
    """The files of one activation dump: a Parquet per block, and the logits."""
    base = results(f"activations/seed{seed}/{set_name}")
    return {
        "blocks": [f"{base}/block{b}.parquet" for b in range(N_LAYER)],
        "logits": f"{base}/logits.parquet",
    }


def dump_input_table(wildcards):
    """The table of strings an activation dump reads: all strings, or one prompt set."""
    if wildcards.set == "strings":
        return rules.build_strings.output.strings
    return results(f"strings/{wildcards.set}.parquet")


def model_files(seed, *names):
    """The files of the model of ``seed`` (a seed or "{seed}") by name (tinylens.model_config.MODEL_FILES: weights,
    config, tokenizer, metrics, loss, checkpoints); without names, the three that rebuild the model
    (tinylens.weights.load_model reads their folder). Every rule asks for a model's files through this."""
    base = results(f"models/seed{seed}")
    return {name: f"{base}/{MODEL_FILES[name]}" for name in names or ("weights", "config", "tokenizer")}


#: The variant models this preset trains (method.md §14): the original seed with one option of the model changed.
VARIANTS = SETTINGS["variants"]["models"]


wildcard_constraints:
    variant="|".join(VARIANT_OPTIONS),


def variant_files(variant, *names):
    """The files of the variant model ``variant`` (or "{variant}") by name, as model_files names a seed's."""
    base = results(f"models/{variant}")  # beside the seeds' models: DVC versions models/ whatever the preset trains
    return {name: f"{base}/{MODEL_FILES[name]}" for name in names or ("weights", "config", "tokenizer")}


def search_shards(mode=None):
    """Every search shard of ``mode`` (None: of the rule's {mode} wildcard)."""
    mode = "{{mode}}" if mode is None else mode
    return gather.search(results(f"search/{mode}/shard_{{scatteritem}}.parquet"))


def null_shards(mode=None):
    """The permuted null's sums of every search shard of ``mode`` (method.md §6b), as :func:`search_shards`."""
    mode = "{{mode}}" if mode is None else mode
    return gather.search(results(f"search/{mode}/null/shard_{{scatteritem}}.parquet"))


# --- figures: each family's table of figures; rules/figures.smk makes one rule per row ---
#: a figure rule's name -> its row (figure, family, category of the report, input, params, mem_mb, under)
FIGURES = {}
#: a figure's name -> the family whose scripts/<family>/plot_<figure>.py draws it and whose report/<family>/
#: holds its caption
FIGURE_FAMILY = {}


def figures(category, family=None, mem_mb=600, under=results, prefix="", **table):
    """Add a family's figures, one row each: ``name=dict(input={...}, params={...}, mem_mb=...)`` (params and
    mem_mb optional). Each row becomes the rule named ``<prefix>plot_<name>``, which runs
    scripts/<family>/plot_<name>.py and writes ``under("figures/<name>.png")`` (results/<preset>/figures/<name>.png),
    shown in the report's ``category`` with report/<family>/<name>.rst. ``under`` and ``prefix`` draw a family's
    figure again elsewhere (an external model's: ``under=external, prefix="external_"``; ``family`` is then the
    one that drew it first). Returns the figure files, for the family's target."""
    for name, row in table.items():
        FIGURE_FAMILY.setdefault(name, family)
        FIGURES[f"{prefix}plot_{name}"] = {
            "figure": name,
            "family": FIGURE_FAMILY[name],
            "category": category,
            "params": {},
            "mem_mb": mem_mb,
            "under": under,
            **row,
        }
    return [under(f"figures/{name}.png") for name in table]


# --- resources: memory and time of the data-sized rules grow with their inputs (tinylens.resources) ---
D_MODEL = SETTINGS["model"]["d_model"]
N_BINS = config["threshold_grid"]["count"]
PROMPTS_PER_SHARD = -(-max(ANALYSIS["n_prompts"], ANALYSIS["paper_prompts"]) // ANALYSIS["search_shards"])


def core_artifacts():
    """Every file of the core reproduction that a later step, a verification or a restore needs,
    intermediates included, so `rule all` notices when one is missing (a deleted shard or dump)."""
    files = [
        results(f)
        for f in ("data/corpus.txt", "data/tokenizer.json", "data/train.npy", "data/val.npy", "strings/strings.parquet")
    ]
    for seed in SEEDS:
        files += model_files(seed, *MODEL_FILES).values()
        for set_name in PROMPT_SETS:
            dump = activations(seed, set_name)
            files += [*dump["blocks"], dump["logits"]]
    for variant in VARIANTS:
        files += variant_files(variant, *MODEL_FILES).values()
    dump = activations(ORIGINAL, "strings")
    files += [*dump["blocks"], dump["logits"]]
    for mode in MODES:
        files += [
            results(f"strings/prompts_{mode}.parquet"),
            *search_shards(mode),
            *null_shards(mode),
            results(f"evaluation/{mode}/hellinger.parquet"),
            results(f"metrics/hellinger_{mode}.json"),
        ]
    for mode in TUNED_MODES:
        files += [results(f"approx/{mode}/tuned.json"), results(f"approx/{mode}/threshold_sweep.csv")]
    files += [results("case_studies/summary.json"), results("case_studies/matches.parquet")]
    return files


# --- the controls of the core claim (rules/controls.smk, method.md §6b) ---
from tinylens.core.controls import EVALUATED

# the prompt modes the controls are evaluated on, and the modes whose tuning prompts tune them
CONTROL_MODES = list(EVALUATED)
CONTROL_TUNED_WITH = {mode: TUNED_WITH[mode] for mode in CONTROL_MODES}
CONTROL_INPUT_MODES = sorted(set(CONTROL_MODES) | set(CONTROL_TUNED_WITH.values()))


def control_prompts(modes=CONTROL_INPUT_MODES):
    """Each mode's prompt table and the original model's logits of its prompts (their dump's folder: the blocks)."""
    files = {f"prompts_{mode}": results(f"strings/prompts_{mode}.parquet") for mode in modes}
    files.update({f"logits_{mode}": activations(ORIGINAL, f"prompts_{mode}")["logits"] for mode in modes})
    return files


# --- the published numbers beside ours (rules/comparison.smk) ---
# The metrics documents the table reads: name -> (file under results/<preset>/, the rule that writes it), from
# the families' registry (tinylens.families). A document whose rule is not part of the workflow is listed as
# "not computed" in its rows.
COMPARISON_SOURCES = comparison_documents(ORIGINAL)


def metrics_file(key, name=None):
    """A family's metrics file under results/<preset>/, from the registry (tinylens.families): the one named
    ``name`` (default: the family's own, named as the family)."""
    return results(family(key).paths()[name or key])


def has_rule(name):
    """Whether the workflow defines rule ``name`` (asked once every rule file is read)."""
    return any(r.name == name for r in workflow.rules)


def comparison_sources(wildcards):
    return {name: results(path) for name, (path, rule) in COMPARISON_SOURCES.items() if has_rule(rule)}


def absent_sources(wildcards):
    return {
        name: f"{path} is not made by this workflow (no rule {rule})"
        for name, (path, rule) in COMPARISON_SOURCES.items()
        if not has_rule(rule)
    }


def findings_metrics(wildcards):
    """Every family's metrics files (tinylens.families.FAMILIES) made by this workflow, the inputs of the run's
    findings (rules/findings.smk)."""
    return [results(path) for family in FAMILIES for path, rule in family.metrics.values() if has_rule(rule)]


# --- end comparison ---


# --- activation dumps (rules/activations.smk) ---
def dump_kinds(wildcards):
    """Prompts keep every kind (the ablation analysis needs them); strings what the preset names."""
    return ANALYSIS["string_kinds"] if wildcards.set == "strings" else list(VECTOR_KINDS)


def phase_runs_input(names):
    """The tables of the named runs and the summary: a figure's input."""
    return dict(
        curves=[results(f"phase_change/{name}/curves.parquet") for name in names],
        heads=[results(f"phase_change/{name}/heads.parquet") for name in names],
        composition=[results(f"phase_change/{name}/composition.parquet") for name in names],
        summary=rules.phase_change_summary.output.summary,
    )


# --- external models through TransformerLens (rules/external.smk) ---
import re

from tinylens.sources import EXTERNAL_SEED, check_available

EXTERNAL_MODELS = config["external_models"]
EXTERNAL_NAMES = config["external"]


def external(path):
    """A file of one external model: results/<preset>/external/<model>/<path>."""
    return results(f"external/{{name}}/{path}")


def external_settings(key):
    return lambda wc: EXTERNAL_MODELS[wc.name][key]


def external_available(wildcards):
    """Stops the plan before any job runs when the `tl` extra is not installed, a checkpoint cannot be loaded
    here (offline, no local copy) or a probe period of the onset is not alias-free."""
    from tinylens.phase_change.onset import check_probe_periods

    entry = EXTERNAL_MODELS[wildcards.name]
    check_available(entry["model"], entry["steps"], entry["revision"])
    onset = entry["onset"]
    check_probe_periods(
        onset["probe_periods"], entry["context"], onset["lookback_periods"], f"external_models.{wildcards.name}.onset"
    )
    return []

# --- end external models ---
