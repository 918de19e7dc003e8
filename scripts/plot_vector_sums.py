"""Figure: to-scale tip-to-tail sums for the case-study prompts (rule plot_vector_sums)."""


from tinylens.jobs import job
from tinylens.supporting.plots import plot_vector_sums

with job(snakemake) as j:
    plot_vector_sums(j.read_json(j.input.paths)["prompts"], j.output.figure)
    j.log.info("wrote %s", j.output.figure)
