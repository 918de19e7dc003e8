"""Figure: histogram of D_i against the simple fractions (rule plot_superposition_fraction_histogram)."""


from tinylens.jobs import job
from tinylens.superposition.levels import parse_fractions
from tinylens.superposition.plots import make_fraction_histogram
from tinylens.superposition.schemas import DIMENSIONALITY_FEATURES
from tinylens.tables import read_columns

with job(snakemake) as j:
    summary = j.read_json(j.input.metrics)["dimensionality"]
    j.save_figure(make_fraction_histogram(read_columns(j.input.features, DIMENSIONALITY_FEATURES),
                                          parse_fractions(j.params.fractions), summary["tolerance"],
                                          j.params.threshold, summary))
