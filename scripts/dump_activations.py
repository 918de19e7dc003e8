"""Last-position activations of every string or prompt, per block, in Parquet (rule dump_activations)."""

from pathlib import Path

import torch

from tinylens.activations import dump_activations
from tinylens.corpus import CharTokenizer
from tinylens.logs import log_to
from tinylens.strings import load_prompts, load_strings
from tinylens.train import select_device
from tinylens.weights import load_model

with log_to(snakemake.log[0]) as log:
    p = snakemake.params
    torch.set_num_threads(snakemake.threads)
    model = load_model(Path(snakemake.input.weights).parent, device=select_device(p.device))
    tokenizer = CharTokenizer.load(snakemake.input.tokenizer)
    if p.set == "strings":
        strings = load_strings(snakemake.input.table, tokenizer.vocab_size).strings
    else:
        strings = load_prompts(snakemake.input.table)["string"]
    out_dir = Path(snakemake.output.logits).parent
    log.info("dumping %s of %d strings for %s into %s", list(p.kinds), len(strings), p.set, out_dir)
    dump_activations(model, tokenizer, strings, out_dir, p.kinds, batch_size=p.batch_size)
    log.info("wrote %d block files and logits.parquet to %s", model.config.n_layer, out_dir)
