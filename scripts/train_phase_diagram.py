"""Train the n = 2, m = 1 phase diagram (every cell and seed in one stack), find the analytic boundary,
and write the tables (rule superposition_phase_diagram)."""

import torch

from tinylens.logs import log_to
from tinylens.superposition.experiments import log_grid, run_phase_diagram
from tinylens.superposition.schemas import PHASE_BOUNDARY, PHASE_CELLS, PHASE_MODELS
from tinylens.tables import write_table
from tinylens.train import select_device

with log_to(snakemake.log[0]) as log:
    p, out = snakemake.params, snakemake.output
    torch.set_num_threads(snakemake.threads)
    spec = p.spec
    tables = run_phase_diagram(log_grid(spec["importance"]), log_grid(spec["density"]), spec["seeds"], spec, p.seed,
                               spec["analytic_rows"], p.threshold, select_device(p.device), progress=True)
    write_table(out.models, PHASE_MODELS, tables["models"])
    write_table(out.cells, PHASE_CELLS, tables["cells"])
    write_table(out.boundary, PHASE_BOUNDARY, tables["boundary"])
    log.info("trained %d models; wrote %s, %s, %s", len(tables["models"]["seed"]), out.models, out.cells, out.boundary)
