"""Tip-to-tail paths of the final residual for the case-study prompts (rule vector_sums)."""

from pathlib import Path

from tinylens.core.corpus import CharTokenizer
from tinylens.jobs import job
from tinylens.supporting.inputs import prompt_tokens
from tinylens.supporting.vector_sums import vector_sum_paths
from tinylens.weights import load_model

with job(snakemake) as j:
    inp, p = j.input, j.params
    model = load_model(Path(inp.weights).parent)
    tokenizer = CharTokenizer.load(inp.tokenizer)
    prompts = [s for s in p.prompts if len(s) == p.length and set(s) <= set(tokenizer.vocab)]
    if len(prompts) < len(p.prompts):
        j.log.warning("skipping case-study prompts that are not %d known characters: %s",
                      p.length, sorted(set(p.prompts) - set(prompts)))
    paths = vector_sum_paths(model, prompt_tokens(tokenizer, prompts), prompts)
    for path in paths:
        j.log.info("%r: |x_7| %.3f, |x_1 + sum ffwd| %.3f, angle between them %.2f degrees", path["prompt"],
                   path["final_norm"], path["ffwd_only_norm"], path["endpoint_angle_degrees"])
    j.write_json(j.output.paths, {"prompts": paths})
