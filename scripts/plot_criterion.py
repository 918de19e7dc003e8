"""Figure: the criterion per block, both subspace variants, chance both ways, the paper's rates (rule plot_criterion)."""


from tinylens.jobs import job
from tinylens.supporting.plots import plot_criterion

with job(snakemake) as j:
    plot_criterion(j.read_json(j.input.metrics)["criterion"], j.output.figure)
    j.log.info("wrote %s", j.output.figure)
