"""The feed-forward-only endpoint against the real final residual, evaluation prompts of both modes
(rule ffwd_endpoint)."""

from pathlib import Path

from tinylens.corpus import CharTokenizer
from tinylens.jobs import job
from tinylens.supporting.inputs import load_prompt_set
from tinylens.supporting.schemas import ENDPOINT_SCHEMA
from tinylens.supporting.summary import summarize_endpoint
from tinylens.supporting.vector_sums import ffwd_only_endpoint
from tinylens.tables import write_table
from tinylens.weights import load_model

with job(snakemake) as j:
    inp, out = j.input, j.output
    model = load_model(Path(inp.weights).parent)
    tokenizer = CharTokenizer.load(inp.tokenizer)
    columns: dict[str, list] = {}
    for mode, path in zip(j.params.modes, inp.prompts, strict=True):
        prompts = load_prompt_set(path, mode, tokenizer, split="eval")
        cols = ffwd_only_endpoint(model, prompts.tokens)
        j.log.info("%s mode: %s", mode, summarize_endpoint(cols))
        for k, v in {"mode": [mode] * len(prompts.strings), "prompt_id": prompts.prompt_id, **cols}.items():
            columns.setdefault(k, []).extend(list(v))
    write_table(out.table, ENDPOINT_SCHEMA, columns)
    j.log.info("wrote %d rows to %s", len(columns["mode"]), out.table)
