"""Phases, windows and best heads of every seed, with the sources' numbers (rule dynamics_summary)."""

from tinylens.dynamics.summary import PhaseSettings, load_curves, seed_summary, summarize
from tinylens.jobs import job
from tinylens.model_config import load_config

with job(snakemake) as j:
    inp, p = j.input, j.params
    cfg = load_config(inp.config)
    settings = PhaseSettings(**p.phases)
    per_seed = {}
    for seed, checkpoints, heads in zip(p.seeds, inp.checkpoints, inp.heads, strict=True):
        curves = load_curves(checkpoints, heads, cfg.n_layer, cfg.n_head, cfg.block_size)
        per_seed[seed] = s = seed_summary(curves, cfg.n_layer, p.batch_size * cfg.block_size, settings)
        j.log.info("seed %d: window %.0f-%.0f (peak %d), best head block %d head %d (0-based; prefix matching "
                   "%.3f), IE/KL phases %s", seed, s["window"]["start"], s["window"]["end"], s["window"]["peak"],
                   s["best_head"]["block"], s["best_head"]["head"], s["best_head"]["prefix_matching"],
                   [i for i in (1, 2, 3) if s["ie_kl"][f"phase_{i}"]])
    j.write_json(j.output.summary, summarize(per_seed, p.original, settings, p.repeat_length, p.repeat_copies))
