# Weight-only circuits (method.md §9): Q-, K-, V-composition between heads in the residual and
# token bases, the symmetry test, composition over training. Target: `snakemake --cores all circuits`.
CIRCUITS = config["circuits"]


rule composition_scores:
    input:
        **model_files("{seed}", "weights", "config", "metrics", "checkpoints"),
    output:
        scores=results("circuits/seed{seed}/scores.parquet"),
        over_training=results("circuits/seed{seed}/over_training.parquet"),
    params:
        seed=lambda wc: int(wc.seed),
        samples=CIRCUITS["baseline_samples"],
        baseline_seed=CIRCUITS["baseline_seed"],
    threads: 1
    resources:
        mem_mb=CIRCUITS["resources"]["mem_mb"],
        runtime=CIRCUITS["resources"]["runtime"],
    log:
        results("logs/composition_scores_seed{seed}.log"),
    benchmark:
        results("benchmarks/composition_scores_seed{seed}.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/circuits/composition_scores.py"


rule symmetry_test:
    input:
        **model_files(ORIGINAL, "weights", "config"),
        val=rules.tokenize.output.val,
    output:
        table=results("circuits/symmetry.parquet"),
        summary=results("circuits/symmetry.json"),
    params:
        seed=ORIGINAL,
        transform_seed=CIRCUITS["transform_seed"],
        conditions=CIRCUITS["condition_numbers"],
        sequences=CIRCUITS["logit_sequences"],
    threads: 1
    resources:
        mem_mb=CIRCUITS["resources"]["mem_mb"],
        runtime=CIRCUITS["resources"]["runtime"],
    log:
        results("logs/symmetry_test.log"),
    benchmark:
        results("benchmarks/symmetry_test.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/circuits/symmetry_test.py"


rule rmsnorm_symmetry:
    """Source 003 with RMSNorm (method.md §14): the symmetry test and the near-symmetries on the RMSNorm variant."""
    input:
        **variant_files("rmsnorm", "weights", "config", "metrics"),
        val=rules.tokenize.output.val,
    output:
        summary=results("circuits/rmsnorm_symmetry.json"),
    params:
        transform_seed=CIRCUITS["transform_seed"],
        conditions=CIRCUITS["condition_numbers"],
        sequences=CIRCUITS["logit_sequences"],
        near_symmetry=CIRCUITS["near_symmetry"],
    threads: 1
    resources:
        mem_mb=CIRCUITS["resources"]["mem_mb"],
        runtime=CIRCUITS["resources"]["runtime"],
    log:
        results("logs/rmsnorm_symmetry.log"),
    benchmark:
        results("benchmarks/rmsnorm_symmetry.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/circuits/rmsnorm_symmetry.py"


rule circuits_summary:
    input:
        **model_files(ORIGINAL, "config"),
        **({"rmsnorm": rules.rmsnorm_symmetry.output.summary} if "rmsnorm" in VARIANTS else {}),
        scores=expand(results("circuits/seed{seed}/scores.parquet"), seed=SEEDS),
        over_training=expand(results("circuits/seed{seed}/over_training.parquet"), seed=SEEDS),
        symmetry=rules.symmetry_test.output.summary,
    output:
        metrics=metrics_file("circuits"),
    params:
        seeds=SEEDS,
        original=ORIGINAL,
        top_pairs=CIRCUITS["top_pairs"],
    resources:
        mem_mb=600,
        runtime=5,
    log:
        results("logs/circuits_summary.log"),
    benchmark:
        results("benchmarks/circuits_summary.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/circuits/circuits_summary.py"


CIRCUITS_FIGURES = figures(
    "Composition",
    family="circuits",
    composition_heatmaps=dict(
        input=dict(scores=results(f"circuits/seed{ORIGINAL}/scores.parquet"), **model_files(ORIGINAL, "config")),
    ),
    composition_symmetry=dict(
        input=dict(table=rules.symmetry_test.output.table, metrics=rules.circuits_summary.output.metrics)
    ),
    composition_kendall_tau=dict(input=dict(metrics=rules.circuits_summary.output.metrics)),
    composition_over_training=dict(
        input=dict(
            tables=expand(results("circuits/seed{seed}/over_training.parquet"), seed=SEEDS),
            # the training-dynamics family's phase-change windows, shaded (rules/dynamics.smk)
            dynamics=metrics_file("dynamics"),
        ),
        params=dict(seeds=SEEDS, original=ORIGINAL, top_pairs=CIRCUITS["top_pairs"]),
    ),
    composition_across_seeds=dict(
        input=dict(
            scores=expand(results("circuits/seed{seed}/scores.parquet"), seed=SEEDS),
            metrics=rules.circuits_summary.output.metrics,
            **model_files(ORIGINAL, "config"),
        ),
        params=dict(original=ORIGINAL),
    ),
)


CIRCUITS_TARGETS = [
    *CIRCUITS_FIGURES,
    rules.circuits_summary.output.metrics,
    # intermediates too: `rule all` then notices one deleted or lost with a failed job
    expand(rules.composition_scores.output, seed=SEEDS),
    rules.symmetry_test.output,
    *([rules.rmsnorm_symmetry.output.summary] if "rmsnorm" in VARIANTS else []),
]


rule circuits:
    input:
        CIRCUITS_TARGETS,
