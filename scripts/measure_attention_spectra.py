"""Every head's attention spectra on validation windows at full context (rule attention_spectra)."""

from pathlib import Path

import torch

from tinylens.attention.schemas import ABSORPTION_SCHEMA, DIAGONAL_SCHEMA, HEAD_SCHEMA
from tinylens.attention.spectra import measure_heads
from tinylens.attention.trajectories import evenly_spaced_windows
from tinylens.corpus import load_ids
from tinylens.logs import log_to
from tinylens.tables import write_table
from tinylens.train import select_device
from tinylens.weights import load_model

with log_to(snakemake.log[0]) as log:
    p, inp, out = snakemake.params, snakemake.input, snakemake.output
    torch.set_num_threads(snakemake.threads)
    device = select_device(p.device)
    model = load_model(Path(inp.weights).parent, device=device)
    windows = evenly_spaced_windows(load_ids(inp.val), p.sequences, model.config.block_size)
    log.info("attention of %d validation windows of %d tokens, %d blocks x %d heads; eigensolver on %d of them",
             len(windows), windows.shape[1], model.config.n_layer, model.config.n_head, min(p.eigen_sample, len(windows)))
    tables = measure_heads(model, torch.from_numpy(windows).to(device), p.walk_doublings, p.eigen_sample)
    for name, schema in (("diagonal", DIAGONAL_SCHEMA), ("absorption", ABSORPTION_SCHEMA), ("heads", HEAD_SCHEMA)):
        write_table(out[name], schema, tables[name])
        log.info("wrote %s (%d rows)", out[name], len(tables[name]["block"]))
