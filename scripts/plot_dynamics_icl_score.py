"""Figure: in-context learning score and validation loss of every seed against step (rule plot_dynamics_icl_score)."""


from tinylens.dynamics.plots import make_icl_score
from tinylens.dynamics.summary import load_curves
from tinylens.jobs import job
from tinylens.weights import load_config

with job(snakemake) as j:
    inp, p = j.input, j.params
    cfg = load_config(inp.config)
    summary = j.read_json(inp.summary)["seeds"]
    curves = {str(seed): load_curves(c, h, cfg.n_layer, cfg.n_head, cfg.block_size)
              for seed, c, h in zip(p.seeds, inp.checkpoints, inp.heads, strict=True)}
    j.save_figure(make_icl_score(curves, summary, p.icl_positions, str(p.original)))
