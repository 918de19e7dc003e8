"""Logit lens, tuned lens and next-token cosines at every depth of validation positions (rule measure_trajectories)."""

from pathlib import Path

import torch

from tinylens.attention.schemas import TRAJECTORY_SCHEMA
from tinylens.attention.trajectories import depth_summary, evenly_spaced_windows, measure_trajectories
from tinylens.attention.tuned_lens import load_lens, read_history, training_endpoints
from tinylens.core.corpus import load_ids
from tinylens.jobs import job
from tinylens.tables import write_table
from tinylens.weights import load_model

with job(snakemake) as j:
    p, inp, out = j.params, j.input, j.output
    device = j.device
    model = load_model(Path(inp.weights).parent, device=device)
    lens = load_lens(inp.lens).to(device)
    windows = evenly_spaced_windows(load_ids(inp.val), p.sequences, model.config.block_size + 1)
    columns = measure_trajectories(model, torch.from_numpy(windows).to(device), lens)
    write_table(out.table, TRAJECTORY_SCHEMA, columns)
    j.log.info("wrote %d rows (depth x sequence x position) to %s", len(columns["depth"]), out.table)
    per_depth = depth_summary(columns)
    summary = {"sequences": len(windows), "positions": int(windows.shape[1] - 1), "vocab_size": model.config.vocab_size,
               "per_depth": per_depth, "tuned_lens_training": training_endpoints(read_history(inp.history))}
    j.write_json(out.summary, summary)
    for row in per_depth:
        j.log.info("depth %d: rank logit %.2f tuned %.2f, KL logit %.4f tuned %.4f", row["depth"], row["logit_rank_mean"],
                   row["tuned_rank_mean"], row["logit_kl_mean"], row["tuned_kl_mean"])
