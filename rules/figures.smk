rule plot_loss_curves:
    input:
        losses=expand(results("models/seed{seed}/loss.csv"), seed=SEEDS),
        corpus_stats=rules.tokenize.output.stats,
    output:
        figure=report(
            results("figures/loss_curves.png"),
            caption="../report/loss_curves.rst",
            category="Training",
        ),
    params:
        seeds=SEEDS,
        original=config["seeds"]["original"],
    resources:
        mem_mb=600,
        runtime=5,
    log:
        results("logs/plot_loss_curves.log"),
    benchmark:
        results("benchmarks/plot_loss_curves.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/plot_loss_curves.py"


rule plot_hellinger_histogram:
    input:
        tables=expand(results("evaluation/{mode}/hellinger.parquet"), mode=MODES),
    output:
        figure=report(
            results("figures/hellinger_histogram.png"),
            caption="../report/hellinger_histogram.rst",
            category="Approximation",
        ),
    params:
        modes=MODES,
        alternates=ALTERNATES,
        n_blocks=N_LAYER,
    resources:
        mem_mb=600,
        runtime=5,
    log:
        results("logs/plot_hellinger_histogram.log"),
    benchmark:
        results("benchmarks/plot_hellinger_histogram.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/plot_hellinger_histogram.py"


rule plot_threshold_sweep:
    input:
        sweeps=expand(results("approx/{mode}/threshold_sweep.csv"), mode=TUNED_MODES),
        tuned=expand(results("approx/{mode}/tuned.json"), mode=TUNED_MODES),
    output:
        figure=report(
            results("figures/threshold_sweep.png"), caption="../report/threshold_sweep.rst", category="Approximation"
        ),
    params:
        modes=TUNED_MODES,
        paper_thresholds=config["paper_baseline"]["thresholds"],
        n_blocks=N_LAYER,
    resources:
        mem_mb=600,
        runtime=5,
    log:
        results("logs/plot_threshold_sweep.log"),
    benchmark:
        results("benchmarks/plot_threshold_sweep.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/plot_threshold_sweep.py"


rule plot_case_studies:
    input:
        summary=rules.case_studies.output.summary,
    output:
        figure=report(
            results("figures/case_studies.png"), caption="../report/case_studies.rst", category="Approximation"
        ),
    resources:
        mem_mb=600,
        runtime=5,
    log:
        results("logs/plot_case_studies.log"),
    benchmark:
        results("benchmarks/plot_case_studies.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/plot_case_studies.py"
