"""Every head's attention spectra on validation windows at full context (rule attention_spectra)."""

from pathlib import Path

import torch

from tinylens.attention.schemas import ABSORPTION_SCHEMA, DIAGONAL_SCHEMA, HEAD_SCHEMA
from tinylens.attention.spectra import measure_heads
from tinylens.attention.trajectories import evenly_spaced_windows
from tinylens.core.corpus import load_ids
from tinylens.jobs import job
from tinylens.tables import write_table
from tinylens.weights import load_model

with job(snakemake) as j:
    p, inp, out = j.params, j.input, j.output
    device = j.device
    model = load_model(Path(inp.weights).parent, device=device)
    windows = evenly_spaced_windows(load_ids(inp.val), p.sequences, model.config.block_size)
    j.log.info("attention of %d validation windows of %d tokens, %d blocks x %d heads; eigensolver on %d of them",
               len(windows), windows.shape[1], model.config.n_layer, model.config.n_head, min(p.eigen_sample, len(windows)))
    tables = measure_heads(model, torch.from_numpy(windows).to(device), p.walk_doublings, p.eigen_sample)
    for name, schema in (("diagonal", DIAGONAL_SCHEMA), ("absorption", ABSORPTION_SCHEMA), ("heads", HEAD_SCHEMA)):
        write_table(out[name], schema, tables[name])
        j.log.info("wrote %s (%d rows)", out[name], len(tables[name]["block"]))
