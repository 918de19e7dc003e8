"""The vector controls: the approximation with sa_out, the block's input or its output, or ffwd_out and sa_out
together, in place of ffwd_out, and ffwd_out itself, searched over a seeded sample of the strings run through the
model here, tuned and evaluated as the approximation is (rule vector_controls, method.md §6b)."""

from pathlib import Path

from tinylens.core.activations import load_logits
from tinylens.core.approx import initial_thresholds, softmax
from tinylens.core.controls import (
    VECTORS,
    evaluate_sources,
    prompt_activations,
    sample_rows,
    string_activations,
    vector_fit,
)
from tinylens.core.corpus import CharTokenizer
from tinylens.core.schemas import controls_schema
from tinylens.core.search import threshold_edges
from tinylens.core.strings import count_strings, load_prompts, load_strings
from tinylens.jobs import job
from tinylens.tables import write_table
from tinylens.weights import load_model

with job(snakemake) as j:
    p, inp = j.params, j.input
    model = load_model(Path(inp.config).parent, device=j.device)
    cfg, tokenizer = model.config, CharTokenizer.load(inp.tokenizer)
    n_strings = count_strings(inp.strings)
    sample = load_strings(inp.strings, cfg.vocab_size, rows=sample_rows(n_strings, p.strings, p.seed))
    string_acts = string_activations(model, tokenizer.encode("".join(sample.strings)).reshape(len(sample), -1))
    j.log.info("ran a sample of %d of %d strings through the model", len(sample), n_strings)
    edges = threshold_edges(**p.grid)

    def load(mode):
        prompts = load_prompts(inp[f"prompts_{mode}"])
        directory = Path(inp[f"logits_{mode}"]).parent
        q = softmax(load_logits(directory, cfg.vocab_size, strings=prompts["string"]))
        return prompts, {**prompt_activations(directory, cfg.n_layer, cfg.d_model, prompts["string"]), "q": q}

    fit = vector_fit(string_acts, sample, edges, initial_thresholds(p.paper, edges, cfg.n_layer), p.rounds,
                     log=j.log.info, threads=j.threads, device=j.device)
    tuned, columns = evaluate_sources(p.modes, p.tuned_with, load, fit)
    write_table(j.output.table, controls_schema(list(VECTORS)), columns)
    j.write_json(j.output.tuned, {**tuned, "strings": len(sample), "of_strings": n_strings, "seed": p.seed})
