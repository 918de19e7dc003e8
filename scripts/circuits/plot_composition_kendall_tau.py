"""Figure: the symmetry test's Kendall-tau table (rule plot_composition_kendall_tau)."""


from tinylens.circuits.plots import make_composition_kendall_tau
from tinylens.jobs import job

with job(snakemake) as j:
    digest = j.read_json(j.input.metrics)["symmetry"]
    j.save_figure(make_composition_kendall_tau(digest))
