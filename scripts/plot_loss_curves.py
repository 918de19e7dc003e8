"""Figure: train and validation loss of every seed over training (rule plot_loss_curves)."""

import json
from pathlib import Path

from tinylens.logs import log_to
from tinylens.plots import plot_loss_curves

with log_to(snakemake.log[0]) as log:
    stats = json.loads(Path(snakemake.input.corpus_stats).read_text())
    plot_loss_curves(
        snakemake.input.losses,
        seeds=snakemake.params.seeds,
        original_seed=snakemake.params.original,
        unigram_entropy=stats["unigram_entropy_nats"],
        out=snakemake.output.figure,
    )
    log.info("wrote %s", snakemake.output.figure)
