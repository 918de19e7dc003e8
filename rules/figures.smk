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
    log:
        results("logs/plot_loss_curves.log"),
    script:
        "../scripts/plot_loss_curves.py"
