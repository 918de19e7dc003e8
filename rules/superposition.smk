# Superposition in toy models (method.md §11, after Elhage et al. 2022). Needs neither the corpus nor
# the transformer: five sweeps of toy models, each trained as one batched stack of independent models,
# then the headline numbers and one figure per script. Target: `snakemake --cores all superposition`.
from tinylens.superposition.summary import summary_settings

SUPER = SETTINGS["superposition"]
SUPER_DEFS = config["superposition"]


SUPERPOSITION_COMMON = dict(
    seed=SUPER["seed"],
    threshold=SUPER_DEFS["represented_norm"],
    device=config["device"],
)


rule superposition_uniform:
    output:
        models=results("superposition/uniform_models.parquet"),
        features=results("superposition/uniform_features.parquet"),
    params:
        **SUPERPOSITION_COMMON,
        spec=SUPER["uniform"],
    threads: SUPER["threads"]
    resources:
        mem_mb=1000,
        runtime=20,
    log:
        results("logs/superposition_uniform.log"),
    benchmark:
        results("benchmarks/superposition_uniform.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/superposition/superposition_uniform.py"


rule superposition_nonuniform:
    output:
        models=results("superposition/nonuniform_models.parquet"),
        features=results("superposition/nonuniform_features.parquet"),
    params:
        **SUPERPOSITION_COMMON,
        spec=SUPER["nonuniform"],
    threads: SUPER["threads"]
    resources:
        mem_mb=1000,
        runtime=20,
    log:
        results("logs/superposition_nonuniform.log"),
    benchmark:
        results("benchmarks/superposition_nonuniform.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/superposition/superposition_nonuniform.py"


rule superposition_dimensionality:
    output:
        models=results("superposition/dimensionality_models.parquet"),
        features=results("superposition/dimensionality_features.parquet"),
        training=results("superposition/dimensionality_training.parquet"),
        jumps=results("superposition/dimensionality_jumps.parquet"),
    params:
        **SUPERPOSITION_COMMON,
        spec=SUPER["dimensionality"],
        fractions=SUPER_DEFS["fractions"],
        tolerance=SUPER_DEFS["tolerance"],
        jumps=SUPER_DEFS["jumps"],
    threads: SUPER["threads"]
    resources:
        mem_mb=2000,
        runtime=30,
    log:
        results("logs/superposition_dimensionality.log"),
    benchmark:
        results("benchmarks/superposition_dimensionality.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/superposition/superposition_dimensionality.py"


rule superposition_phase_diagram:
    output:
        models=results("superposition/phase_models.parquet"),
        cells=results("superposition/phase_cells.parquet"),
        boundary=results("superposition/phase_boundary.parquet"),
    params:
        **SUPERPOSITION_COMMON,
        spec=SUPER["phase_diagram"],
    threads: SUPER["threads"]
    resources:
        mem_mb=1000,
        runtime=20,
    log:
        results("logs/superposition_phase_diagram.log"),
    benchmark:
        results("benchmarks/superposition_phase_diagram.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/superposition/superposition_phase_diagram.py"


rule superposition_correlated:
    output:
        models=results("superposition/correlated_models.parquet"),
        features=results("superposition/correlated_features.parquet"),
        pairs=results("superposition/correlated_pairs.parquet"),
        groups=results("superposition/correlated_groups.parquet"),
    params:
        **SUPERPOSITION_COMMON,
        spec=SUPER["correlated"],
    threads: SUPER["threads"]
    resources:
        mem_mb=1000,
        runtime=20,
    log:
        results("logs/superposition_correlated.log"),
    benchmark:
        results("benchmarks/superposition_correlated.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/superposition/superposition_correlated.py"


rule superposition_summary:
    input:
        # named as the tables are in tinylens.superposition.schemas.TABLES
        uniform_models=rules.superposition_uniform.output.models,
        nonuniform_models=rules.superposition_nonuniform.output.models,
        dimensionality_models=rules.superposition_dimensionality.output.models,
        dimensionality_features=rules.superposition_dimensionality.output.features,
        dimensionality_jumps=rules.superposition_dimensionality.output.jumps,
        dimensionality_training=rules.superposition_dimensionality.output.training,
        phase_cells=rules.superposition_phase_diagram.output.cells,
        phase_boundary=rules.superposition_phase_diagram.output.boundary,
        correlated_models=rules.superposition_correlated.output.models,
        correlated_pairs=rules.superposition_correlated.output.pairs,
        correlated_groups=rules.superposition_correlated.output.groups,
    output:
        metrics=metrics_file("superposition"),
    params:
        preset=PRESET,
        settings=summary_settings(SUPER, SUPER_DEFS),
    resources:
        mem_mb=1000,
        runtime=5,
    log:
        results("logs/superposition_summary.log"),
    benchmark:
        results("benchmarks/superposition_summary.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/superposition/superposition_summary.py"


SUPERPOSITION_FIGURES = figures(
    "Superposition",
    family="superposition",
    mem_mb=500,
    superposition_polygons=dict(
        input=dict(
            models=rules.superposition_uniform.output.models, features=rules.superposition_uniform.output.features
        )
    ),
    superposition_phase_change=dict(
        input=dict(
            models=rules.superposition_nonuniform.output.models, features=rules.superposition_nonuniform.output.features
        )
    ),
    superposition_loss_crossing=dict(
        input=dict(
            models=rules.superposition_nonuniform.output.models, metrics=rules.superposition_summary.output.metrics
        )
    ),
    superposition_dimensionality=dict(
        input=dict(
            models=rules.superposition_dimensionality.output.models,
            features=rules.superposition_dimensionality.output.features,
        ),
        params=dict(fractions=SUPER_DEFS["fractions"], threshold=SUPER_DEFS["represented_norm"]),
    ),
    superposition_fraction_histogram=dict(
        input=dict(
            features=rules.superposition_dimensionality.output.features,
            metrics=rules.superposition_summary.output.metrics,
        ),
        params=dict(fractions=SUPER_DEFS["fractions"], threshold=SUPER_DEFS["represented_norm"]),
    ),
    superposition_dimensionality_training=dict(
        input=dict(
            training=rules.superposition_dimensionality.output.training,
            jumps=rules.superposition_dimensionality.output.jumps,
        ),
        params=dict(
            sparsity=SUPER["dynamics_sparsity"],
            fractions=SUPER_DEFS["fractions"],
            threshold=SUPER_DEFS["represented_norm"],
        ),
        mem_mb=1000,
    ),
    superposition_phase_diagram=dict(
        input=dict(
            cells=rules.superposition_phase_diagram.output.cells,
            boundary=rules.superposition_phase_diagram.output.boundary,
        )
    ),
    superposition_correlated=dict(
        input=dict(
            models=rules.superposition_correlated.output.models,
            features=rules.superposition_correlated.output.features,
            pairs=rules.superposition_correlated.output.pairs,
        )
    ),
)


# The family's outputs: rule all and the target `superposition` ask for these.
SUPERPOSITION_TARGETS = [
    *SUPERPOSITION_FIGURES,
    rules.superposition_summary.output.metrics,
    # intermediates too: `rule all` then notices one deleted or lost with a failed job
    rules.superposition_uniform.output,
    rules.superposition_nonuniform.output,
    rules.superposition_dimensionality.output,
    rules.superposition_phase_diagram.output,
    rules.superposition_correlated.output,
]


rule superposition:
    input:
        SUPERPOSITION_TARGETS,
