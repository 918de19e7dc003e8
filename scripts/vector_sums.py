"""Tip-to-tail paths of the final residual for the case-study prompts (rule vector_sums)."""

from pathlib import Path

from tinylens.atomic import write_json
from tinylens.corpus import CharTokenizer
from tinylens.logs import log_to
from tinylens.supporting.inputs import prompt_tokens
from tinylens.supporting.vector_sums import vector_sum_paths
from tinylens.weights import load_model

with log_to(snakemake.log[0]) as log:
    inp, p = snakemake.input, snakemake.params
    model = load_model(Path(inp.weights).parent)
    tokenizer = CharTokenizer.load(inp.tokenizer)
    prompts = [s for s in p.prompts if len(s) == p.length and set(s) <= set(tokenizer.vocab)]
    if len(prompts) < len(p.prompts):
        log.warning("skipping case-study prompts that are not %d known characters: %s",
                    p.length, sorted(set(p.prompts) - set(prompts)))
    paths = vector_sum_paths(model, prompt_tokens(tokenizer, prompts), prompts)
    for path in paths:
        log.info("%r: |x_7| %.3f, |x_1 + sum ffwd| %.3f, angle between them %.2f degrees", path["prompt"],
                 path["final_norm"], path["ffwd_only_norm"], path["endpoint_angle_degrees"])
    write_json(snakemake.output.paths, {"prompts": paths})
    log.info("wrote %s", snakemake.output.paths)
