"""Figure: scores before vs after each change of residual basis T (rule plot_composition_symmetry)."""


import polars as pl

from tinylens.circuits.plots import make_composition_symmetry
from tinylens.circuits.schemas import SYMMETRY_SCHEMA
from tinylens.jobs import job
from tinylens.tables import read_table

with job(snakemake) as j:
    table = pl.from_arrow(read_table(j.input.table, SYMMETRY_SCHEMA))
    digest = j.read_json(j.input.metrics)["symmetry"]
    j.save_figure(make_composition_symmetry(table, digest))
