"""Figure: interaction energy, KL to the unigram and the unigram direction against step (rule plot_dynamics_energy_kl)."""


from tinylens.dynamics.plots import make_energy_kl
from tinylens.dynamics.summary import curves_of_seeds
from tinylens.jobs import job
from tinylens.model_config import load_config

with job(snakemake) as j:
    inp = j.input
    cfg = load_config(inp.config)
    summary = j.read_json(inp.summary)["seeds"]
    curves = curves_of_seeds(cfg.n_layer, cfg.n_head, cfg.block_size, j.params.seeds, inp.checkpoints, inp.heads)
    j.save_figure(make_energy_kl(curves, summary, cfg.n_layer))
