"""Figure: the symmetry test's Kendall-tau table (rule plot_composition_kendall_tau)."""


from tinylens.circuits.plots import plot_composition_kendall_tau
from tinylens.jobs import job

with job(snakemake) as j:
    digest = j.read_json(j.input.metrics)["symmetry"]
    plot_composition_kendall_tau(digest, j.output.figure)
    j.log.info("wrote %s", j.output.figure)
