"""The approximation with Euclidean distance and with other string lengths, beside the default, on the same
held-out prompts of the original model (rule approx_robustness, method.md §7)."""

from pathlib import Path

from tinylens.core.approx import paper_setting
from tinylens.core.corpus import load_ids
from tinylens.core.search import threshold_edges
from tinylens.jobs import job
from tinylens.supporting.robustness import RobustnessSettings, run_variants
from tinylens.supporting.schemas import robustness_schema
from tinylens.tables import write_table
from tinylens.weights import load_model

with job(snakemake) as j:
    p = j.params
    model = load_model(Path(j.input.config).parent).eval()
    grid = threshold_edges(**p.grid)
    paper = paper_setting(p.paper, grid, model.config.n_layer)
    init = paper[0] if paper is not None else [len(grid) // 2] * model.config.n_layer  # as tune_approximation
    settings = RobustnessSettings(**p.shared, **p.sizes)
    summary, columns = run_variants(model, load_ids(j.input.train), load_ids(j.input.val), p.length, settings,
                                    p.tune_fraction, grid, init, p.rounds, log=j.log.info)
    write_table(j.output.table, robustness_schema(summary["variants"]), columns)
    j.write_json(j.output.summary, summary)
