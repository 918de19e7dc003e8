"""Figure: histogram of per-prompt Hellinger distances, approximation and alternates (rule plot_hellinger_histogram)."""

from tinylens.approx import hellinger_schema
from tinylens.logs import log_to
from tinylens.plots import plot_hellinger_histogram
from tinylens.tables import read_table

with log_to(snakemake.log[0]) as log:
    schema = hellinger_schema(snakemake.params.alternates, snakemake.params.n_blocks)
    tables = {}
    for mode, path in zip(snakemake.params.modes, snakemake.input.tables):
        t = read_table(path, schema)
        on_eval = t["split"].to_numpy(zero_copy_only=False) == "eval"
        tables[mode] = {k: t[k].to_numpy()[on_eval] for k in t.column_names if k.startswith("hellinger_")}
    plot_hellinger_histogram(tables, snakemake.output.figure)
    log.info("wrote %s", snakemake.output.figure)
