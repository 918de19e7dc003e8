"""Figure: scores before vs after each change of residual basis T (rule plot_composition_symmetry)."""

import json
from pathlib import Path

import polars as pl

from tinylens.circuits.plots import plot_composition_symmetry
from tinylens.circuits.symmetry import SYMMETRY_SCHEMA
from tinylens.logs import log_to
from tinylens.tables import read_table

with log_to(snakemake.log[0]) as log:
    table = pl.from_arrow(read_table(snakemake.input.table, SYMMETRY_SCHEMA))
    digest = json.loads(Path(snakemake.input.metrics).read_text())["symmetry"]
    plot_composition_symmetry(table, digest, snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
