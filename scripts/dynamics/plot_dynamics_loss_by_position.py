"""Figure: the original seed's loss at every context position x checkpoint, and its log-position
derivative (rule plot_dynamics_loss_by_position)."""


from tinylens.dynamics.plots import make_loss_by_position
from tinylens.dynamics.summary import load_curves
from tinylens.jobs import job
from tinylens.model_config import load_config

with job(snakemake) as j:
    inp, seed = j.input, str(j.params.original)
    cfg = load_config(inp.config)
    summary = j.read_json(inp.summary)["seeds"][seed]
    curves = load_curves(inp.checkpoints, inp.heads, cfg.n_layer, cfg.n_head, cfg.block_size)
    j.save_figure(make_loss_by_position(curves, summary, seed, j.params.smooth_decades))
