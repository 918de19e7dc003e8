"""Figure: losses of the pentagon and two-digon geometries and where they cross
(rule plot_superposition_loss_crossing)."""


from tinylens.jobs import job
from tinylens.superposition.plots import make_loss_crossing
from tinylens.superposition.schemas import NONUNIFORM_MODELS
from tinylens.tables import read_columns

with job(snakemake) as j:
    summary = j.read_json(j.input.metrics)["phase_change"]
    crossing = summary["crossing_relative_density"]
    j.save_figure(make_loss_crossing(read_columns(j.input.models, NONUNIFORM_MODELS),
                                     crossing if isinstance(crossing, float) else None, summary["fixed_sparsity"]))
