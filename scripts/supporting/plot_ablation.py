"""Figure: ablation per block, both variants and contexts, the paper's table beside (rule plot_ablation)."""


from tinylens.jobs import job
from tinylens.supporting.plots import make_ablation

with job(snakemake) as j:
    j.save_figure(make_ablation(j.read_json(j.input.metrics)["ablation"]))
