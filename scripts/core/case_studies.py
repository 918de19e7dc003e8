"""Full match lists and approximations of the case-study prompts (rule case_studies)."""

from pathlib import Path

from tinylens.core.activations import load_block
from tinylens.core.case_studies import (
    check_prompts,
    find_matches,
    match_rows,
    prompt_activations,
    summarize,
)
from tinylens.core.corpus import CharTokenizer
from tinylens.core.schemas import MATCHES_SCHEMA
from tinylens.core.strings import load_strings
from tinylens.jobs import job
from tinylens.tables import write_table
from tinylens.weights import load_model

with job(snakemake) as j:
    p, inp = j.params, j.input
    model = load_model(Path(inp.weights).parent)
    tokenizer = CharTokenizer.load(inp.tokenizer)
    table = load_strings(inp.strings, tokenizer.vocab_size)
    check_prompts(p.prompts, p.length, tokenizer)
    vectors, q = prompt_activations(model, tokenizer, p.prompts)
    string_dir = Path(inp.string_logits).parent
    matches = find_matches(vectors, lambda b: load_block(string_dir, b, "ffwd_out", model.config.d_model,
                                                         strings=table.strings), p.min_cosine)
    tuned = j.read_json(inp.tuned)
    counts = table.counts("corpus")
    summaries = [summarize(prompt, q[i], [matches[b][i] for b in range(len(matches))], table.strings, counts,
                           tuned, tuned.get("paper_values")) for i, prompt in enumerate(p.prompts)]
    j.write_json(j.output.summary, {"vocab": list(tokenizer.vocab), "case_studies": summaries})
    rows = match_rows(p.prompts, matches, table.strings)
    write_table(j.output.matches, MATCHES_SCHEMA, rows)
    for s in summaries:
        j.log.info("%r: tuned H %.3f with matches %s; block 0 only at 0.95: %s",
                   s["prompt"], s["tuned"]["hellinger"], s["tuned"]["matches"], s["block0_only"]["0.95"])
    j.log.info("wrote %d match rows to %s and %s", len(rows["prompt"]), j.output.matches, j.output.summary)
