# tinylens: a reproducible workflow for how a small character-level transformer
# predicts the next token. The stages live in rules/; see README.md.
import os
import sys
from pathlib import Path

from snakemake.utils import min_version

min_version("9.22")


# The workflow's one software environment. With --sdm conda, Snakemake deploys it, adds it to
# this process (the imports below need it) and runs every rule's job in it (each rule's conda:).
conda: "envs/tinylens.yaml"


# This checkout's library, for this process and every job (also in the conda environment and
# on cluster nodes, where tinylens need not be installed).
SRC = str(Path(workflow.basedir) / "src")
sys.path.insert(0, SRC)
os.environ.update(PYTHONPATH=os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH")) if p))

# Every job's malloc (glibc reads these at start; other allocators ignore them). By default glibc returns freed
# blocks above a moving threshold to the kernel and maps them anew, so a job that allocates the same temporaries
# every step (training, the per-checkpoint measures) pays a page fault per 4 KiB page each time: 39 million in a
# default run, a tenth of its CPU time in the kernel. Blocks under 32 MiB now stay in the heap for reuse
# (docs/benchmarks.md, "malloc"). A value already in the environment wins.
MALLOC_SETTINGS = {
    "MALLOC_MMAP_THRESHOLD_": 32 << 20,  # blocks under 32 MiB come from the heap
    "MALLOC_TRIM_THRESHOLD_": 1 << 32,  # freed memory waits in the heap for the next step
    "MALLOC_TOP_PAD_": 64 << 20,  # the heap grows 64 MiB at a time
}
for name, value in MALLOC_SETTINGS.items():
    os.environ.setdefault(name, str(value))

from tinylens.atomic import remove_stale_temporaries
from tinylens.config import validate_config


configfile: Path(workflow.basedir) / "config/config.yaml"


# Stops here, before any job is planned, on an unknown key or a wrong type.
validate_config(config, Path(workflow.basedir) / "config/schema.yaml")


include: "rules/common.smk"
include: "rules/corpus.smk"
include: "rules/train.smk"
include: "rules/sample.smk"
include: "rules/strings.smk"
include: "rules/activations.smk"
include: "rules/search.smk"
include: "rules/approx.smk"
include: "rules/controls.smk"  # the controls of the core claim (method.md §6b)
include: "rules/supporting.smk"  # supporting analyses (method.md §7)
include: "rules/circuits.smk"  # weight-only circuits (method.md §9)
include: "rules/superposition.smk"  # superposition in toy models (method.md §11)
include: "rules/dynamics.smk"  # training dynamics (method.md §8)
include: "rules/phase_change.smk"  # the induction-head phase change (method.md §8b)
include: "rules/attention.smk"  # attention dynamics (method.md §10)
include: "rules/external.smk"  # external models through TransformerLens (method.md §13); not in `all`
include: "rules/figures.smk"  # every figure: the core's and each family's table, one rule per row
include: "rules/comparison.smk"  # the published numbers beside ours (after every family: it reads their metrics)
include: "rules/findings.smk"  # the run's findings in words (after every family: it reads their metrics)


# The report's front page: what the workflow is, and a link to the findings (rules/findings.smk).
report: "report/workflow.rst"


onstart:
    # Temporaries that killed jobs of earlier runs left (`.tmp-*`, never a finished file).
    remove_stale_temporaries(f"results/{PRESET}", recursive=True)
    # and of this preset's headline, in the folder every preset's shares (rules/comparison.smk)
    headline = Path(rules.write_headline.output[0])
    remove_stale_temporaries(headline.parent, name=headline.name)


# The core reproduction (method.md §0-6): `snakemake --cores all core`.
CORE_TARGETS = [
    # intermediates too: a deleted shard or dump is noticed and remade, not silently missing
    core_artifacts(),
    CORE_FIGURES,  # rules/figures.smk
    results("metrics/corpus.json"),
    metrics_file("core", "training"),
    expand(results("samples/seed{seed}.txt"), seed=SEEDS),
    expand(results("metrics/hellinger_{mode}.json"), mode=MODES),
    results("metrics/search_verification.json"),
    metrics_file("core", "hellinger"),
    results("metrics/headline.json"),
    CONTROLS_TARGETS,  # rules/controls.smk
]


rule all:
    input:
        CORE_TARGETS,
        SUPPORTING_TARGETS,  # supporting analyses (rules/supporting.smk)
        CIRCUITS_TARGETS,  # circuits family (rules/circuits.smk)
        SUPERPOSITION_TARGETS,  # superposition family (rules/superposition.smk)
        DYNAMICS_TARGETS,  # training-dynamics family (rules/dynamics.smk)
        PHASE_TARGETS,  # the induction-head phase change (rules/phase_change.smk)
        ATTENTION_TARGETS,  # attention dynamics (rules/attention.smk)
        rules.comparison.input,  # the published numbers beside ours (rules/comparison.smk)
        rules.findings.input,  # the run's findings in words (rules/findings.smk)
    default_target: True


rule core:
    input:
        CORE_TARGETS,
