"""Figure: the original seed's per-head prefix-matching and copying scores against step (rule plot_dynamics_head_scores)."""


from tinylens.dynamics.plots import make_head_scores
from tinylens.dynamics.summary import load_curves
from tinylens.jobs import job
from tinylens.model_config import load_config

with job(snakemake) as j:
    inp, seed = j.input, str(j.params.original)
    cfg = load_config(inp.config)
    summary = j.read_json(inp.summary)
    curves = load_curves(inp.checkpoints, inp.heads, cfg.n_layer, cfg.n_head, cfg.block_size)
    baseline = summary["headline"]["prefix_matching_uniform_baseline"]
    j.save_figure(make_head_scores(curves, summary["seeds"][seed], seed, baseline))
