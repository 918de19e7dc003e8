"""Character tokenizer and the train/validation split (rule tokenize)."""

from pathlib import Path

from tinylens.core.corpus import prepare_corpus, save_ids
from tinylens.jobs import job

with job(snakemake) as j:
    out = j.output
    text = Path(j.input.corpus).read_text(encoding="utf-8")
    prepared = prepare_corpus(text, j.params.corpus_chars, j.params.train_fraction)
    prepared.tokenizer.save(out.tokenizer)
    save_ids(out.train, prepared.train)
    save_ids(out.val, prepared.val)
    j.write_json(out.stats, prepared.stats)
    j.log.info("vocabulary of %d characters -> %s", prepared.tokenizer.vocab_size, out.tokenizer)
    j.log.info("%d train / %d validation tokens -> %s, %s", len(prepared.train), len(prepared.val), out.train, out.val)
