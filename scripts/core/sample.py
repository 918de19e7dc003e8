"""Generate a text sample from one trained model (rule sample)."""

from pathlib import Path

from tinylens.atomic import write_text
from tinylens.core.corpus import CharTokenizer
from tinylens.core.sampling import sample_text
from tinylens.jobs import job
from tinylens.weights import load_model

with job(snakemake) as j:
    p = j.params
    model = load_model(Path(j.input.weights).parent)
    tokenizer = CharTokenizer.load(j.input.tokenizer)
    text = sample_text(model, tokenizer, p.prompt, p.num_chars, p.seed, p.temperature)
    write_text(j.output.sample, text + "\n")
    j.log.info("wrote %d characters to %s", len(text), j.output.sample)
