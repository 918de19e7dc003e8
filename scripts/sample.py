"""Generate a text sample from one trained model (rule sample)."""

from pathlib import Path

from tinylens.atomic import write_text
from tinylens.corpus import CharTokenizer
from tinylens.logs import log_to
from tinylens.sampling import sample_text
from tinylens.weights import load_model

with log_to(snakemake.log[0]) as log:
    p = snakemake.params
    model = load_model(Path(snakemake.input.weights).parent)
    tokenizer = CharTokenizer.load(snakemake.input.tokenizer)
    text = sample_text(model, tokenizer, p.prompt, p.num_chars, p.seed, p.temperature)
    write_text(snakemake.output.sample, text + "\n")
    log.info("wrote %d characters to %s", len(text), snakemake.output.sample)
