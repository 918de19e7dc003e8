"""Figure: the feed-forward-only endpoint against the real final residual (rule plot_ffwd_endpoint)."""

from tinylens.jobs import job
from tinylens.supporting.plots import make_ffwd_endpoint
from tinylens.supporting.schemas import ENDPOINT_SCHEMA
from tinylens.tables import read_columns

with job(snakemake) as j:
    cols = read_columns(j.input.table, ENDPOINT_SCHEMA)
    modes = list(dict.fromkeys(cols["mode"]))
    j.save_figure(make_ffwd_endpoint({m: {k: v[cols["mode"] == m] for k, v in cols.items()} for m in modes}))
