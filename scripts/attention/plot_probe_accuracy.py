"""Figure: speaker-probe accuracy by depth against chance (rule plot_probe_accuracy)."""

from tinylens.attention.plots import make_probe_accuracy
from tinylens.attention.schemas import PROBE_SCHEMA
from tinylens.jobs import job
from tinylens.tables import read_columns

with job(snakemake) as j:
    speakers = j.read_json(j.input.summary)["speakers"]
    j.save_figure(make_probe_accuracy(read_columns(j.input.table, PROBE_SCHEMA), len(speakers)))
