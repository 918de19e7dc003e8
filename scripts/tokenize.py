"""Character tokenizer and the train/validation split (rule tokenize)."""

from pathlib import Path

from tinylens.atomic import write_json
from tinylens.corpus import prepare_corpus, save_ids
from tinylens.logs import log_to

with log_to(snakemake.log[0]) as log:
    out = snakemake.output
    text = Path(snakemake.input.corpus).read_text(encoding="utf-8")
    prepared = prepare_corpus(text, snakemake.params.corpus_chars, snakemake.params.train_fraction)
    prepared.tokenizer.save(out.tokenizer)
    save_ids(out.train, prepared.train)
    save_ids(out.val, prepared.val)
    write_json(out.stats, prepared.stats)
    log.info("vocabulary of %d characters -> %s", prepared.tokenizer.vocab_size, out.tokenizer)
    log.info("%d train / %d validation tokens -> %s, %s", len(prepared.train), len(prepared.val), out.train, out.val)
