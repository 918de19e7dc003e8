"""Speaker probes on passage-averaged residual streams at every depth (rule probe_speakers)."""

from collections import Counter
from pathlib import Path

from tinylens.attention.probes import choose_speakers, passages, pooled_features, probe_by_depth
from tinylens.attention.schemas import PASSAGE_SCHEMA, PROBE_SCHEMA
from tinylens.attention.summary import summarize_probes
from tinylens.core.corpus import CharTokenizer, load_ids
from tinylens.jobs import job
from tinylens.tables import write_table
from tinylens.weights import load_model

with job(snakemake) as j:
    p, inp, out = j.params, j.input, j.output
    model = load_model(Path(inp.weights).parent, device=j.device)
    tokenizer = CharTokenizer.load(inp.tokenizer)
    texts = {"train": tokenizer.decode(load_ids(inp.train)), "val": tokenizer.decode(load_ids(inp.val))}
    speakers = choose_speakers(texts["train"], texts["val"], p.probe["speakers"], p.probe["min_speeches"])
    chunks = {split: passages(text, speakers, model.config.block_size, p.probe["min_chars"])
              for split, text in texts.items()}
    j.log.info("speakers %s; passages: train %d, val %d", speakers, len(chunks["train"]), len(chunks["val"]))
    features = {split: pooled_features(model, [tokenizer.encode(x.text) for x in chunk]) for split, chunk in chunks.items()}
    labels = {split: [x.speaker for x in chunk] for split, chunk in chunks.items()}
    columns = probe_by_depth(features["train"], labels["train"], features["val"], labels["val"],
                             c=p.probe["C"], seed=p.seed, shuffles=p.probe["shuffles"], progress=True)
    write_table(out.table, PROBE_SCHEMA, columns)
    write_table(out.passages, PASSAGE_SCHEMA, {
        "split": [s for s, chunk in chunks.items() for _ in chunk],
        "speaker": [x.speaker for chunk in chunks.values() for x in chunk],
        "text": [x.text for chunk in chunks.values() for x in chunk]})
    summary = {"speakers": speakers, "passage_chars": [p.probe["min_chars"], model.config.block_size],
               "passages": {split: dict(Counter(labels[split])) for split in chunks}, **summarize_probes(columns)}
    j.write_json(out.summary, summary)
    j.log.info("best logistic depth %d: %s (chance %s); wrote %s, %s, %s", summary["best_logistic_depth"],
               summary["best_logistic"], summary["chance"], out.table, out.passages, out.summary)
