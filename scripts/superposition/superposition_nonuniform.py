"""Train the non-uniform sweep (one feature's density varied; pentagon, two-digon and random starts in
one stack) and write its tables (rule superposition_nonuniform)."""


from tinylens.jobs import job
from tinylens.superposition.experiments import log_grid, run_nonuniform
from tinylens.superposition.schemas import NONUNIFORM_FEATURES, NONUNIFORM_MODELS
from tinylens.tables import write_table

with job(snakemake) as j:
    p, out = j.params, j.output
    spec = p.spec
    tables = run_nonuniform(spec["fixed_sparsity"], log_grid(spec["relative_density"]), spec["random_seeds"], spec,
                            p.seed, p.threshold, j.device, progress=True)
    write_table(out.models, NONUNIFORM_MODELS, tables["models"])
    write_table(out.features, NONUNIFORM_FEATURES, tables["features"])
    j.log.info("trained %d models; wrote %s and %s", len(tables["models"]["seed"]), out.models, out.features)
