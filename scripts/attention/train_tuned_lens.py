"""Train one affine translator per depth on training-text positions (rule train_tuned_lens)."""

from pathlib import Path

import torch

from tinylens.attention.trajectories import collect_positions, evenly_spaced_windows
from tinylens.attention.tuned_lens import LensTraining, save_lens, train_tuned_lens, training_endpoints, write_history
from tinylens.core.corpus import load_ids
from tinylens.jobs import job
from tinylens.weights import load_model

with job(snakemake) as j:
    p, inp, out = j.params, j.input, j.output
    device = j.device
    model = load_model(Path(inp.weights).parent, device=device)
    windows = evenly_spaced_windows(load_ids(inp.train), p.sequences, model.config.block_size)
    resid, final = collect_positions(model, torch.from_numpy(windows).to(device))
    settings = LensTraining(**p.settings, seed=p.seed)
    j.log.info("training %d translators on %d training-text positions: %s", model.config.n_layer, resid.shape[1], settings)
    lens, history = train_tuned_lens(model, resid[:-1], final, settings)  # the last depth needs none
    save_lens(out.lens, lens)
    write_history(out.history, history)
    ends = training_endpoints(history)
    j.log.info("mean KL(final || tuned lens) per depth, first -> last steps: %s -> %s",
               [round(v, 4) for v in ends["first_steps_kl"]], [round(v, 4) for v in ends["last_steps_kl"]])
    j.log.info("wrote %s and %s", out.lens, out.history)
