"""Figure: source 001's convex-hull reading per head against shuffled and uniform attention (rule
plot_attention_hull)."""

from tinylens.attention.plots import make_attention_hull
from tinylens.attention.schemas import HULL_SCHEMA
from tinylens.jobs import job
from tinylens.tables import read_columns

with job(snakemake) as j:
    j.save_figure(make_attention_hull(read_columns(j.input.table, HULL_SCHEMA)))
