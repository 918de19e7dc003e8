"""Figure: to-scale tip-to-tail sums for the case-study prompts (rule plot_vector_sums)."""


from tinylens.jobs import job
from tinylens.supporting.plots import make_vector_sums

with job(snakemake) as j:
    j.save_figure(make_vector_sums(j.read_json(j.input.paths)["prompts"]))
