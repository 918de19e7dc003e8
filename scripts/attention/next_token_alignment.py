"""The final state against the next token's embedding row in the original model and the tied variant, on the same
validation windows (rule next_token_alignment)."""

from pathlib import Path

import torch

from tinylens.attention.trajectories import alignment_summary, evenly_spaced_windows, final_state_alignment
from tinylens.core.corpus import load_ids
from tinylens.core.training_log import training_digest
from tinylens.jobs import job
from tinylens.weights import load_model

with job(snakemake) as j:
    p, inp = j.params, j.input
    models = {"untied": load_model(Path(inp.weights).parent, device=j.device),
              "tied": load_model(Path(inp.tied).parent, device=j.device)}
    block_size = models["untied"].config.block_size
    windows = torch.from_numpy(evenly_spaced_windows(load_ids(inp.val), p.sequences, block_size + 1)).to(j.device)
    training = {name: training_digest(j.read_json(path)) for name, path in (("untied", inp.metrics),
                                                                          ("tied", inp.tied_metrics))}
    summary = {name: {**alignment_summary(final_state_alignment(model, windows), model.config.vocab_size),
                      "training": training[name]} for name, model in models.items()}
    for name, s in summary.items():
        j.log.info("%s: cos with the next token's embedding row %.4f, mean rank %.2f of %d", name,
                   s["cos_embed"]["cosine"]["mean"], s["cos_embed"]["rank"]["mean"], s["vocab_size"])
    j.write_json(j.output.summary, {"sequences": len(windows), "models": summary})
