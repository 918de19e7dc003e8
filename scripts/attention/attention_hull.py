"""Source 001's convex-hull reading, tested per head on validation windows at full context against
shuffled and uniform attention (rule attention_hull)."""

from pathlib import Path

import torch

from tinylens.attention.hull import measure_hull
from tinylens.attention.schemas import HULL_SCHEMA
from tinylens.attention.summary import summarize_hull
from tinylens.attention.trajectories import evenly_spaced_windows
from tinylens.core.corpus import load_ids
from tinylens.jobs import job
from tinylens.tables import write_table
from tinylens.weights import load_model

with job(snakemake) as j:
    p, inp = j.params, j.input
    model = load_model(Path(inp.weights).parent, device=j.device)
    windows = evenly_spaced_windows(load_ids(inp.val), p.sequences, model.config.block_size)
    j.log.info("convex-hull reading on %d validation windows of %d tokens, %d blocks x %d heads", len(windows),
               windows.shape[1], model.config.n_layer, model.config.n_head)
    columns = measure_hull(model, torch.from_numpy(windows).to(j.device), p.seed)
    summary = summarize_hull(columns)
    j.log.info("heads whose attention beats shuffled attention: %s; uniform: %s; |z - A v| at most %.2g",
               summary["verdicts"]["shuffled"], summary["verdicts"]["uniform"], summary["identity_max_error"])
    write_table(j.output.table, HULL_SCHEMA, columns)
    j.log.info("wrote %s (%d rows)", j.output.table, len(columns["block"]))
