"""Headline numbers of the superposition family, the source's findings beside ours (rule superposition_summary)."""

from tinylens.atomic import write_json
from tinylens.logs import log_to
from tinylens.superposition.experiments import summarize_family
from tinylens.superposition.levels import parse_fractions
from tinylens.superposition.schemas import TABLES, read_columns

with log_to(snakemake.log[0]) as log:
    p, i = snakemake.params, snakemake.input
    metrics = summarize_family(
        uniform=read_columns(i.uniform, TABLES["uniform_models"]),
        nonuniform=read_columns(i.nonuniform, TABLES["nonuniform_models"]),
        dim_models=read_columns(i.dim_models, TABLES["dimensionality_models"]),
        dim_features=read_columns(i.dim_features, TABLES["dimensionality_features"]),
        jumps=read_columns(i.jumps, TABLES["dimensionality_jumps"]),
        phase_cells=read_columns(i.phase_cells, TABLES["phase_cells"]),
        phase_boundary=read_columns(i.phase_boundary, TABLES["phase_boundary"]),
        fixed_sparsity=p.fixed_sparsity, dynamics_sparsity=p.dynamics_sparsity, phase_seeds=p.phase_seeds,
        fractions=parse_fractions(p.fractions), tolerance=p.tolerance, jump_settings=p.jumps, threshold=p.threshold,
    )
    write_json(snakemake.output.metrics, {"preset": p.preset, **metrics})
    log.info("headline: %s; wrote %s", metrics["headline"], snakemake.output.metrics)
