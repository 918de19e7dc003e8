"""Figure: the criterion per block, both subspace variants, chance both ways, the paper's rates (rule plot_criterion)."""


from tinylens.jobs import job
from tinylens.supporting.plots import make_criterion

with job(snakemake) as j:
    j.save_figure(make_criterion(j.read_json(j.input.metrics)["criterion"]))
