"""The final LayerNorm under scaling and noise, on the evaluation prompts of both modes (rule final_layernorm)."""

from pathlib import Path

import numpy as np

from tinylens.core.corpus import CharTokenizer
from tinylens.jobs import job
from tinylens.supporting.inputs import extend_columns, prompt_sets
from tinylens.supporting.layernorm import noise_experiment, scaling_deviation
from tinylens.supporting.schemas import NOISE_SCHEMA, SCALING_SCHEMA
from tinylens.supporting.summary import summarize_noise, summarize_scaling
from tinylens.tables import write_table
from tinylens.weights import load_model

with job(snakemake) as j:
    inp, out, p = j.input, j.output, j.params
    model = load_model(Path(inp.weights).parent)
    tokenizer = CharTokenizer.load(inp.tokenizer)
    tables = {"scaling": {}, "noise": {}}
    for prompts in prompt_sets(inp.prompts, p.modes, tokenizer, split="eval"):
        mode = prompts.mode
        for name, cols, repeats in (
            ("scaling", scaling_deviation(model, prompts.tokens, p.factors), len(p.factors)),
            ("noise", noise_experiment(model, prompts.tokens, p.levels, p.seed), len(p.levels)),
        ):
            cols = {"mode": [mode] * (repeats * len(prompts.strings)),
                    "prompt_id": np.tile(prompts.prompt_id, repeats), **cols}
            extend_columns(tables[name], cols)
            summary = summarize_scaling(cols) if name == "scaling" else summarize_noise(cols)
            j.log.info("%s mode, %s: %s", mode, name, summary)
    write_table(out.scaling, SCALING_SCHEMA, tables["scaling"])
    write_table(out.noise, NOISE_SCHEMA, tables["noise"])
    j.log.info("wrote %s and %s", out.scaling, out.noise)
