"""Figure: train and validation loss of every seed over training (rule plot_loss_curves)."""

from tinylens.core.plots import make_loss_curves
from tinylens.core.training_log import load_loss_curve
from tinylens.jobs import job

with job(snakemake) as j:
    curves = {seed: load_loss_curve(path) for seed, path in zip(j.params.seeds, j.input.losses, strict=True)}
    stats = j.read_json(j.input.corpus_stats)
    j.save_figure(make_loss_curves(curves, j.params.original, stats["unigram_entropy_nats"]))
