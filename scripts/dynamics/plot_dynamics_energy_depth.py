"""Figure: interaction energy at every depth of the final models (rule plot_dynamics_energy_depth)."""


from tinylens.dynamics.plots import make_energy_depth
from tinylens.dynamics.summary import curves_of_seeds
from tinylens.jobs import job
from tinylens.model_config import load_config

with job(snakemake) as j:
    inp, p = j.input, j.params
    cfg = load_config(inp.config)
    summary = j.read_json(inp.summary)["seeds"]
    curves = curves_of_seeds(cfg.n_layer, cfg.n_head, cfg.block_size, p.seeds, inp.checkpoints, inp.heads)
    j.save_figure(make_energy_depth(curves, summary, cfg.n_layer, str(p.original)))
