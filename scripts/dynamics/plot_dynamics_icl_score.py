"""Figure: in-context learning score and validation loss of every seed against step (rule plot_dynamics_icl_score)."""


from tinylens.dynamics.plots import make_icl_score
from tinylens.dynamics.summary import curves_of_seeds
from tinylens.jobs import job
from tinylens.model_config import load_config

with job(snakemake) as j:
    inp, p = j.input, j.params
    cfg = load_config(inp.config)
    summary = j.read_json(inp.summary)["seeds"]
    curves = curves_of_seeds(cfg.n_layer, cfg.n_head, cfg.block_size, p.seeds, inp.checkpoints, inp.heads)
    j.save_figure(make_icl_score(curves, summary, p.icl_positions, p.icl_bands, str(p.original)))
