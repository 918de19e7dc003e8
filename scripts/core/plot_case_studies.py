"""Figure: model vs approximation for the case-study prompts, with their matching strings (rule plot_case_studies)."""

from tinylens.core.plots import make_case_studies
from tinylens.jobs import job

with job(snakemake) as j:
    j.save_figure(make_case_studies(j.read_json(j.input.summary)))
