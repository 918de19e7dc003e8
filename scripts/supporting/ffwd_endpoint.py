"""The feed-forward-only endpoint against the real final residual, evaluation prompts of both modes
(rule ffwd_endpoint)."""

from pathlib import Path

from tinylens.core.corpus import CharTokenizer
from tinylens.jobs import job
from tinylens.supporting.inputs import extend_columns, prompt_sets
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
    for prompts in prompt_sets(inp.prompts, j.params.modes, tokenizer, split="eval"):
        cols = ffwd_only_endpoint(model, prompts.tokens)
        j.log.info("%s mode: %s", prompts.mode, summarize_endpoint(cols))
        extend_columns(columns, {"mode": [prompts.mode] * len(prompts.strings), "prompt_id": prompts.prompt_id, **cols})
    write_table(out.table, ENDPOINT_SCHEMA, columns)
    j.log.info("wrote %d rows to %s", len(columns["mode"]), out.table)
