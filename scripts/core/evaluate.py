"""Per-prompt Hellinger distances and their summary, for one prompt mode (rule evaluate)."""

from pathlib import Path

from tinylens.core.activations import load_logits
from tinylens.core.approx import (
    evaluate,
    hellinger_schema,
    in_train_text,
    load_sweep,
    paper_setting,
    softmax,
    summary_for_prompts,
    tuned_setting,
)
from tinylens.core.controls import evaluation_blocks
from tinylens.core.search import cumulative, threshold_edges
from tinylens.core.strings import load_prompts, load_string_names
from tinylens.core.summary import evaluation_summary
from tinylens.jobs import job
from tinylens.model_config import load_config
from tinylens.tables import write_table

with job(snakemake) as j:
    p, inp, out = j.params, j.input, j.output
    cfg, edges = load_config(inp.config), threshold_edges(**p.grid)
    prompts = load_prompts(inp.prompts)
    matches, counts = summary_for_prompts(inp.shards, prompts["prompt_id"], cfg.n_layer, len(edges), cfg.vocab_size)
    tuned = j.read_json(inp.tuned)
    q = {seed: softmax(load_logits(Path(path).parent, cfg.vocab_size, strings=prompts["string"])) for seed, path in zip(p.seeds, inp.logits)}
    alternates = [s for s in p.seeds if s != p.original]
    # in place: the counts are the run's largest array (no second copy of them)
    columns = evaluate(cumulative(counts, axis=2, out=counts), cumulative(matches, axis=2, out=matches),
                       q[p.original], {s: q[s] for s in alternates}, tuned_setting(tuned, edges),
                       paper_setting(tuned["paper_values"], edges, cfg.n_layer) if "paper_values" in tuned else None)
    in_train = in_train_text(prompts["string"], *load_string_names(inp.strings, cfg.vocab_size))
    write_table(out.table, hellinger_schema(alternates, cfg.n_layer), {**prompts, "in_train": in_train, **columns})
    j.log.info("wrote per-prompt distances of %d prompts to %s", len(prompts["prompt_id"]), out.table)
    # each block's share of the approximation, and each block alone (method.md §6b)
    blocks = evaluation_blocks(counts, q[p.original], prompts["split"], tuned, load_sweep(inp.sweep), edges)
    summary = evaluation_summary(columns, prompts["split"], in_train, alternates, tuned, p.mode, p.tuned_with, blocks)
    j.write_json(out.summary, summary)
    j.log.info("%s mode (values tuned on the %s mode): approximation mean H %.4f (in the train text verbatim: %s of the prompts), alternates %s -> %s",
               p.mode, p.tuned_with, summary["approximation"]["mean"], summary["verbatim_in_train"]["share"],
               {s: v["mean"] for s, v in summary["alternates"].items()}, out.summary)
