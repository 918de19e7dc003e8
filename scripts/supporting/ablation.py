"""Ablation distances of one model, every prompt of both modes (rule ablation)."""

from pathlib import Path

from tinylens.core.corpus import CharTokenizer
from tinylens.jobs import job
from tinylens.supporting.ablation import ablation_distances, ablation_rows
from tinylens.supporting.inputs import extend_columns, prompt_sets
from tinylens.supporting.schemas import ablation_schema
from tinylens.tables import write_table
from tinylens.weights import load_model

with job(snakemake) as j:
    inp, out = j.input, j.output
    model = load_model(Path(inp.weights).parent)
    tokenizer = CharTokenizer.load(inp.tokenizer)
    columns: dict[str, list] = {}
    for prompts in prompt_sets(inp.prompts, j.params.modes, tokenizer):
        distances = ablation_distances(model, prompts.tokens)
        extend_columns(columns, ablation_rows(prompts.mode, prompts.prompt_id, prompts.split, distances))
        for (context, variant), h in distances.items():
            j.log.info("%s mode, %s context, %s: mean H per block %s", prompts.mode, context, variant,
                       h.mean(0).round(4).tolist())
    write_table(out.table, ablation_schema(model.config.n_layer), columns)
    j.log.info("wrote %d rows to %s", len(columns["mode"]), out.table)
