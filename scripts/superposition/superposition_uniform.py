"""Train the uniform-sparsity sweep (n features in 2 dims, every setting and seed in one stack) and
write its tables (rule superposition_uniform)."""


from tinylens.jobs import job
from tinylens.superposition.experiments import run_uniform
from tinylens.superposition.schemas import UNIFORM_FEATURES, UNIFORM_MODELS
from tinylens.tables import write_table

with job(snakemake) as j:
    p, out = j.params, j.output
    spec = p.spec
    tables = run_uniform(spec["features"], spec["sparsities"], spec["seeds"], spec["importance_decay"], spec,
                         p.seed, p.threshold, j.device, progress=True)
    write_table(out.models, UNIFORM_MODELS, tables["models"])
    write_table(out.features, UNIFORM_FEATURES, tables["features"])
    j.log.info("trained %d models; wrote %s and %s", len(tables["models"]["seed"]), out.models, out.features)
