"""Train the n = 2, m = 1 phase diagram (every cell and seed in one stack), find the analytic boundary,
and write the tables (rule superposition_phase_diagram)."""


from tinylens.jobs import job
from tinylens.superposition.experiments import log_grid, run_phase_diagram
from tinylens.superposition.schemas import PHASE_BOUNDARY, PHASE_CELLS, PHASE_MODELS
from tinylens.tables import write_table

with job(snakemake) as j:
    p, out = j.params, j.output
    spec = p.spec
    tables = run_phase_diagram(log_grid(spec["importance"]), log_grid(spec["density"]), spec["seeds"], spec, p.seed,
                               spec["analytic_rows"], p.threshold, j.device, progress=True)
    write_table(out.models, PHASE_MODELS, tables["models"])
    write_table(out.cells, PHASE_CELLS, tables["cells"])
    write_table(out.boundary, PHASE_BOUNDARY, tables["boundary"])
    j.log.info("trained %d models; wrote %s, %s, %s", len(tables["models"]["seed"]), out.models, out.cells, out.boundary)
