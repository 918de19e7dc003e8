"""Figure: ablation per block, both variants and contexts, the paper's table beside (rule plot_ablation)."""


from tinylens.jobs import job
from tinylens.supporting.plots import plot_ablation

with job(snakemake) as j:
    plot_ablation(j.read_json(j.input.metrics)["ablation"], j.output.figure)
    j.log.info("wrote %s", j.output.figure)
