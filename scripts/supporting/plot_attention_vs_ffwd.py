"""Figure: attention against feed-forward output per block over every evaluation prompt (rule
plot_attention_vs_ffwd)."""

from tinylens.jobs import job
from tinylens.supporting.plots import make_attention_vs_ffwd
from tinylens.supporting.schemas import CONTRIBUTIONS_SCHEMA
from tinylens.supporting.summary import split_by_mode
from tinylens.tables import read_columns

with job(snakemake) as j:
    cols = read_columns(j.input.table, CONTRIBUTIONS_SCHEMA)
    j.save_figure(make_attention_vs_ffwd(split_by_mode(cols, list(dict.fromkeys(cols["mode"])))))
