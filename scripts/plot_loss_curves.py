"""Figure: train and validation loss of every seed over training (rule plot_loss_curves)."""

from tinylens.atomic import read_json
from tinylens.logs import log_to
from tinylens.plots import plot_loss_curves
from tinylens.train import load_loss_curve

with log_to(snakemake.log[0]) as log:
    curves = {seed: load_loss_curve(path) for seed, path in zip(snakemake.params.seeds, snakemake.input.losses,
                                                                strict=True)}
    stats = read_json(snakemake.input.corpus_stats)
    plot_loss_curves(curves, snakemake.params.original, stats["unigram_entropy_nats"], snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
