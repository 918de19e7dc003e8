# The induction-head phase change (method.md §8b): small attention-only models trained on a stated
# mixture of TinyShakespeare windows and repeated windows (or random tokens, the second dataset), each
# run one job that trains its seeds and measures their checkpoints as they train; then every run's
# verdict, then the figures. Target: `phase_change`.
from tinylens.phase_change.schemas import run_settings

PHASE = SETTINGS["phase_change"]
PHASE_RUNS = {name: run_settings(PHASE["base"], run) for name, run in PHASE["runs"].items()}
PHASE_TABLES = {
    table: expand(results(f"phase_change/{{run}}/{table}.parquet"), run=PHASE_RUNS)
    for table in ("curves", "heads", "composition")
}


rule phase_change_run:
    input:
        tokenizer=rules.tokenize.output.tokenizer,
        train=rules.tokenize.output.train,
        val=rules.tokenize.output.val,
    output:
        curves=results("phase_change/{run}/curves.parquet"),
        heads=results("phase_change/{run}/heads.parquet"),
        composition=results("phase_change/{run}/composition.parquet"),
    params:
        run=lambda wildcards: PHASE_RUNS[wildcards.run],
        probes=PHASE["probes"],
    threads: PHASE["threads"]
    resources:
        mem_mb=PHASE["resources"]["mem_mb"],
        runtime=PHASE["resources"]["runtime"],
    log:
        results("logs/phase_change_run_{run}.log"),
    benchmark:
        results("benchmarks/phase_change_run_{run}.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/phase_change/phase_change_run.py"


rule phase_change_summary:
    input:
        **PHASE_TABLES,
    output:
        summary=metrics_file("phase_change"),
    params:
        runs=PHASE_RUNS,
        reference=PHASE["reference"],
        detect=PHASE["detect"],
        verdict=PHASE["verdict"],
    resources:
        mem_mb=1000,
        runtime=5,
    log:
        results("logs/phase_change_summary.log"),
    benchmark:
        results("benchmarks/phase_change_summary.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/phase_change/phase_change_summary.py"


# seed 000's widths: the reference and every run that differs from `base` only in its width (and seeds)
PHASE_WIDTHS = sorted(
    (name for name, run in PHASE["runs"].items() if name == PHASE["reference"] or set(run) == {"seeds", "d_model"}),
    key=lambda name: PHASE_RUNS[name]["d_model"],
)
PHASE_FIGURES = figures(
    "Phase change",
    family="phase_change",
    mem_mb=1000,
    phase_change_curves=dict(input=phase_runs_input([PHASE["reference"]]), params=dict(run=PHASE["reference"])),
    phase_change_loss_derivative=dict(
        input=dict(
            curves=results(f"phase_change/{PHASE['reference']}/curves.parquet"),
            heads=results(f"phase_change/{PHASE['reference']}/heads.parquet"),
            composition=results(f"phase_change/{PHASE['reference']}/composition.parquet"),
            summary=rules.phase_change_summary.output.summary,
        ),
        params=dict(run=PHASE["reference"], smooth_decades=PHASE["detect"]["smooth_decades"]),
    ),
    phase_change_controls=dict(input=phase_runs_input(list(PHASE_RUNS)), params=dict(runs=list(PHASE_RUNS))),
    phase_change_energy_kl=dict(input=phase_runs_input(PHASE_WIDTHS), params=dict(runs=PHASE_WIDTHS)),
)


PHASE_TARGETS = [
    *PHASE_FIGURES,
    rules.phase_change_summary.output.summary,
    # intermediates too: `rule all` then notices one deleted or lost with a failed job
    *PHASE_TABLES["curves"],
    *PHASE_TABLES["heads"],
    *PHASE_TABLES["composition"],
]


rule phase_change:
    input:
        PHASE_TARGETS,
