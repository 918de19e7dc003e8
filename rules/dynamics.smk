# Training dynamics over checkpoints (method.md §8): every checkpoint of every seed measured on the
# same probes, then the phases found by code, then one figure per script. Target: `dynamics`.
DYNAMICS = SETTINGS["dynamics"]
DYNAMICS_TABLES = {
    "checkpoints": expand(results("dynamics/seed{seed}/checkpoints.parquet"), seed=SEEDS),
    "heads": expand(results("dynamics/seed{seed}/heads.parquet"), seed=SEEDS),
}


rule dynamics_measure:
    input:
        **model_files("{seed}", "checkpoints", "config"),
        tokenizer=rules.tokenize.output.tokenizer,
        train=rules.tokenize.output.train,
        val=rules.tokenize.output.val,
    output:
        checkpoints=results("dynamics/seed{seed}/checkpoints.parquet"),
        heads=results("dynamics/seed{seed}/heads.parquet"),
    params:
        measure=DYNAMICS["measure"],
        batch_size=TRAIN["batch_size"],
        device=config["device"],
    threads: DYNAMICS["threads"]
    resources:
        mem_mb=DYNAMICS["resources"]["mem_mb"],
        runtime=DYNAMICS["resources"]["runtime"],
        gpu=DYNAMICS["resources"]["gpu"],
    log:
        results("logs/dynamics_measure_seed{seed}.log"),
    benchmark:
        results("benchmarks/dynamics_measure_seed{seed}.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/dynamics/dynamics_measure.py"


rule dynamics_summary:
    input:
        **DYNAMICS_TABLES,
        **model_files(ORIGINAL, "config"),
    output:
        summary=metrics_file("dynamics"),
    params:
        seeds=SEEDS,
        original=ORIGINAL,
        phases=DYNAMICS["phases"],
        # the prefix-matching sequences' shape: the uniform head's baseline
        repeat_length=DYNAMICS["measure"]["repeat"]["length"],
        repeat_copies=DYNAMICS["measure"]["repeat"]["copies"],
        batch_size=TRAIN["batch_size"],
    resources:
        mem_mb=1000,
        runtime=5,
    log:
        results("logs/dynamics_summary.log"),
    benchmark:
        results("benchmarks/dynamics_summary.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/dynamics/dynamics_summary.py"


DYNAMICS_FIGURES = figures(
    "Training dynamics",
    family="dynamics",
    mem_mb=1000,
    dynamics_energy_kl=dict(
        input=dict(
            **DYNAMICS_TABLES,
            summary=rules.dynamics_summary.output.summary,
            **model_files(ORIGINAL, "config"),
        ),
        params=dict(seeds=SEEDS),
    ),
    dynamics_icl_score=dict(
        input=dict(
            **DYNAMICS_TABLES,
            summary=rules.dynamics_summary.output.summary,
            **model_files(ORIGINAL, "config"),
        ),
        params=dict(
            seeds=SEEDS,
            original=ORIGINAL,
            icl_positions=DYNAMICS["measure"]["icl_positions"],
            icl_bands=DYNAMICS["measure"]["icl_bands"],
        ),
    ),
    dynamics_loss_by_position=dict(
        input=dict(
            checkpoints=results(f"dynamics/seed{ORIGINAL}/checkpoints.parquet"),
            heads=results(f"dynamics/seed{ORIGINAL}/heads.parquet"),
            summary=rules.dynamics_summary.output.summary,
            **model_files(ORIGINAL, "config"),
        ),
        params=dict(original=ORIGINAL, smooth_decades=DYNAMICS["loss_by_position"]["smooth_decades"]),
    ),
    dynamics_head_scores=dict(
        input=dict(
            checkpoints=results(f"dynamics/seed{ORIGINAL}/checkpoints.parquet"),
            heads=results(f"dynamics/seed{ORIGINAL}/heads.parquet"),
            summary=rules.dynamics_summary.output.summary,
            **model_files(ORIGINAL, "config"),
        ),
        params=dict(original=ORIGINAL),
    ),
    dynamics_energy_depth=dict(
        input=dict(
            **DYNAMICS_TABLES,
            summary=rules.dynamics_summary.output.summary,
            **model_files(ORIGINAL, "config"),
        ),
        params=dict(seeds=SEEDS, original=ORIGINAL),
    ),
)


DYNAMICS_TARGETS = [
    *DYNAMICS_FIGURES,
    rules.dynamics_summary.output.summary,
    # intermediates too: `rule all` then notices one deleted or lost with a failed job
    expand(rules.dynamics_measure.output, seed=SEEDS),
]


rule dynamics:
    input:
        DYNAMICS_TARGETS,
