"""Train the correlated / anti-correlated feature-group models (every setting and seed in one stack),
measure each pair of features and each correlated group, and write the tables (rule superposition_correlated)."""

from tinylens.jobs import job
from tinylens.superposition.experiments import run_correlated
from tinylens.superposition.schemas import CORRELATED_FEATURES, CORRELATED_GROUPS, CORRELATED_MODELS, CORRELATED_PAIRS
from tinylens.tables import write_table

with job(snakemake) as j:
    p, out = j.params, j.output
    spec = p.spec
    tables = run_correlated(spec["settings"], spec["seeds"], spec, p.seed, p.threshold, j.device, progress=True)
    write_table(out.models, CORRELATED_MODELS, tables["models"])
    write_table(out.features, CORRELATED_FEATURES, tables["features"])
    write_table(out.pairs, CORRELATED_PAIRS, tables["pairs"])
    write_table(out.groups, CORRELATED_GROUPS, tables["groups"])
    j.log.info("trained %d models; %d pairs of represented features; wrote %s, %s, %s, %s",
               len(tables["models"]["seed"]), len(tables["pairs"]["cos"]), out.models, out.features, out.pairs,
               out.groups)
