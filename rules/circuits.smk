# Weight-only circuits (method.md §9): Q-, K-, V-composition between heads in the residual and
# token bases, the symmetry test, composition over training. Target: `snakemake --cores all circuits`.
CIRCUITS = config["circuits"]
MODEL = SETTINGS["model"]


rule composition_scores:
    input:
        weights=results("models/seed{seed}/model.safetensors"),
        config=results("models/seed{seed}/config.json"),
        metrics=results("models/seed{seed}/metrics.json"),
        checkpoints=results("models/seed{seed}/checkpoints"),
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
        "../scripts/composition_scores.py"


rule symmetry_test:
    input:
        weights=results(f"models/seed{ORIGINAL}/model.safetensors"),
        config=results(f"models/seed{ORIGINAL}/config.json"),
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
        "../scripts/symmetry_test.py"


rule circuits_summary:
    input:
        scores=expand(results("circuits/seed{seed}/scores.parquet"), seed=SEEDS),
        over_training=expand(results("circuits/seed{seed}/over_training.parquet"), seed=SEEDS),
        symmetry=rules.symmetry_test.output.summary,
    output:
        metrics=results("metrics/circuits.json"),
    params:
        seeds=SEEDS,
        original=ORIGINAL,
        n_layer=MODEL["n_layer"],
        n_head=MODEL["n_head"],
        d_model=MODEL["n_embed"],
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
        "../scripts/circuits_summary.py"


rule plot_composition_heatmaps:
    input:
        scores=results(f"circuits/seed{ORIGINAL}/scores.parquet"),
    output:
        figure=report(
            results("figures/composition_heatmaps.png"),
            caption="../report/composition_heatmaps.rst",
            category="Composition",
        ),
    params:
        n_layer=MODEL["n_layer"],
        n_head=MODEL["n_head"],
    resources:
        mem_mb=600,
        runtime=5,
    log:
        results("logs/plot_composition_heatmaps.log"),
    benchmark:
        results("benchmarks/plot_composition_heatmaps.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/plot_composition_heatmaps.py"


rule plot_composition_symmetry:
    input:
        table=rules.symmetry_test.output.table,
        metrics=rules.circuits_summary.output.metrics,
    output:
        figure=report(
            results("figures/composition_symmetry.png"),
            caption="../report/composition_symmetry.rst",
            category="Composition",
        ),
    resources:
        mem_mb=600,
        runtime=5,
    log:
        results("logs/plot_composition_symmetry.log"),
    benchmark:
        results("benchmarks/plot_composition_symmetry.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/plot_composition_symmetry.py"


rule plot_composition_kendall_tau:
    input:
        metrics=rules.circuits_summary.output.metrics,
    output:
        figure=report(
            results("figures/composition_kendall_tau.png"),
            caption="../report/composition_kendall_tau.rst",
            category="Composition",
        ),
    resources:
        mem_mb=600,
        runtime=5,
    log:
        results("logs/plot_composition_kendall_tau.log"),
    benchmark:
        results("benchmarks/plot_composition_kendall_tau.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/plot_composition_kendall_tau.py"


rule plot_composition_over_training:
    input:
        tables=expand(results("circuits/seed{seed}/over_training.parquet"), seed=SEEDS),
        # the training-dynamics family's phase-change windows, shaded (rules/dynamics.smk)
        dynamics=results("metrics/dynamics.json"),
    output:
        figure=report(
            results("figures/composition_over_training.png"),
            caption="../report/composition_over_training.rst",
            category="Composition",
        ),
    params:
        seeds=SEEDS,
        original=ORIGINAL,
        top_pairs=CIRCUITS["top_pairs"],
    resources:
        mem_mb=600,
        runtime=5,
    log:
        results("logs/plot_composition_over_training.log"),
    benchmark:
        results("benchmarks/plot_composition_over_training.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/plot_composition_over_training.py"


rule plot_composition_across_seeds:
    input:
        scores=expand(results("circuits/seed{seed}/scores.parquet"), seed=SEEDS),
        metrics=rules.circuits_summary.output.metrics,
    output:
        figure=report(
            results("figures/composition_across_seeds.png"),
            caption="../report/composition_across_seeds.rst",
            category="Composition",
        ),
    params:
        original=ORIGINAL,
        n_layer=MODEL["n_layer"],
    resources:
        mem_mb=600,
        runtime=5,
    log:
        results("logs/plot_composition_across_seeds.log"),
    benchmark:
        results("benchmarks/plot_composition_across_seeds.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/plot_composition_across_seeds.py"


CIRCUITS_TARGETS = [
    rules.circuits_summary.output.metrics,
    rules.plot_composition_heatmaps.output.figure,
    rules.plot_composition_symmetry.output.figure,
    rules.plot_composition_kendall_tau.output.figure,
    rules.plot_composition_over_training.output.figure,
    rules.plot_composition_across_seeds.output.figure,
    # intermediates too: `rule all` then notices one deleted or lost with a failed job
    expand(rules.composition_scores.output, seed=SEEDS),
    rules.symmetry_test.output,
]


rule circuits:
    input:
        CIRCUITS_TARGETS,
