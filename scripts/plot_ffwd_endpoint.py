"""Figure: the feed-forward-only endpoint against the real final residual (rule plot_ffwd_endpoint)."""

from tinylens.logs import log_to
from tinylens.supporting.plots import plot_ffwd_endpoint
from tinylens.supporting.schemas import ENDPOINT_SCHEMA, table_columns
from tinylens.tables import read_table

with log_to(snakemake.log[0]) as log:
    cols = table_columns(read_table(snakemake.input.table, ENDPOINT_SCHEMA))
    modes = list(dict.fromkeys(cols["mode"]))
    plot_ffwd_endpoint({m: {k: v[cols["mode"] == m] for k, v in cols.items()} for m in modes}, snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
