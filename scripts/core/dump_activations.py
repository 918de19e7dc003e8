"""Last-position activations of every string or prompt, per block, in Parquet (rule dump_activations)."""

from pathlib import Path

from tinylens.core.activations import dump_activations
from tinylens.core.corpus import CharTokenizer
from tinylens.core.strings import load_prompts, load_strings
from tinylens.jobs import job
from tinylens.weights import load_model

with job(snakemake) as j:
    p = j.params
    model = load_model(Path(j.input.weights).parent, device=j.device)
    tokenizer = CharTokenizer.load(j.input.tokenizer)
    if p.set == "strings":
        strings = load_strings(j.input.table, tokenizer.vocab_size).strings
    else:
        strings = load_prompts(j.input.table)["string"]
    out_dir = Path(j.output.logits).parent
    j.log.info("dumping %s of %d strings for %s into %s", list(p.kinds), len(strings), p.set, out_dir)
    dump_activations(model, tokenizer, strings, out_dir, p.kinds, batch_size=p.batch_size)
    j.log.info("wrote %d block files and logits.parquet to %s", model.config.n_layer, out_dir)
