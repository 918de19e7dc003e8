# Superposition in toy models (method.md §11, after Elhage et al. 2022). Needs neither the corpus nor
# the transformer: four sweeps of toy models, each trained as one batched stack of independent models,
# then the headline numbers and one figure per script. Target: `snakemake --cores all superposition`.
from tinylens.config import ConfigError
from tinylens.superposition.experiments import preset_problems

SUPER = SETTINGS["superposition"]
SUPER_DEFS = config["superposition"]
_problems = preset_problems(SUPER, f"presets.{PRESET}.superposition")
if _problems:
    raise ConfigError("invalid configuration (config/config.yaml and --config overrides):\n  - "
                      + "\n  - ".join(_problems) + "\nFix the key in config/config.yaml.")


def superposition_path(path):
    return results(f"superposition/{path}")


SUPERPOSITION_COMMON = dict(
    seed=SUPER["seed"],
    threshold=SUPER_DEFS["represented_norm"],
    device=config["device"],
)


rule superposition_uniform:
    output:
        models=superposition_path("uniform_models.parquet"),
        features=superposition_path("uniform_features.parquet"),
    params:
        spec=SUPER["uniform"],
        **SUPERPOSITION_COMMON,
    threads: SUPER["threads"]
    resources:
        mem_mb=1000,
        runtime=20,
    log:
        results("logs/superposition_uniform.log"),
    benchmark:
        results("benchmarks/superposition_uniform.tsv")
    script:
        "../scripts/train_uniform_sweep.py"


rule superposition_nonuniform:
    output:
        models=superposition_path("nonuniform_models.parquet"),
        features=superposition_path("nonuniform_features.parquet"),
    params:
        spec=SUPER["nonuniform"],
        **SUPERPOSITION_COMMON,
    threads: SUPER["threads"]
    resources:
        mem_mb=1000,
        runtime=20,
    log:
        results("logs/superposition_nonuniform.log"),
    benchmark:
        results("benchmarks/superposition_nonuniform.tsv")
    script:
        "../scripts/train_nonuniform_sweep.py"


rule superposition_dimensionality:
    output:
        models=superposition_path("dimensionality_models.parquet"),
        features=superposition_path("dimensionality_features.parquet"),
        training=superposition_path("dimensionality_training.parquet"),
        jumps=superposition_path("dimensionality_jumps.parquet"),
    params:
        spec=SUPER["dimensionality"],
        fractions=SUPER_DEFS["fractions"],
        tolerance=SUPER_DEFS["tolerance"],
        jumps=SUPER_DEFS["jumps"],
        **SUPERPOSITION_COMMON,
    threads: SUPER["threads"]
    resources:
        mem_mb=2000,
        runtime=30,
    log:
        results("logs/superposition_dimensionality.log"),
    benchmark:
        results("benchmarks/superposition_dimensionality.tsv")
    script:
        "../scripts/train_dimensionality_sweep.py"


rule superposition_phase_diagram:
    output:
        models=superposition_path("phase_models.parquet"),
        cells=superposition_path("phase_cells.parquet"),
        boundary=superposition_path("phase_boundary.parquet"),
    params:
        spec=SUPER["phase_diagram"],
        **SUPERPOSITION_COMMON,
    threads: SUPER["threads"]
    resources:
        mem_mb=1000,
        runtime=20,
    log:
        results("logs/superposition_phase_diagram.log"),
    benchmark:
        results("benchmarks/superposition_phase_diagram.tsv")
    script:
        "../scripts/train_phase_diagram.py"


rule superposition_summary:
    input:
        uniform=rules.superposition_uniform.output.models,
        nonuniform=rules.superposition_nonuniform.output.models,
        dim_models=rules.superposition_dimensionality.output.models,
        dim_features=rules.superposition_dimensionality.output.features,
        jumps=rules.superposition_dimensionality.output.jumps,
        phase_cells=rules.superposition_phase_diagram.output.cells,
        phase_boundary=rules.superposition_phase_diagram.output.boundary,
    output:
        metrics=results("metrics/superposition.json"),
    params:
        preset=PRESET,
        fixed_sparsity=SUPER["nonuniform"]["fixed_sparsity"],
        dynamics_sparsity=SUPER["dimensionality"]["dynamics_sparsity"],
        phase_seeds=SUPER["phase_diagram"]["seeds"],
        fractions=SUPER_DEFS["fractions"],
        tolerance=SUPER_DEFS["tolerance"],
        jumps=SUPER_DEFS["jumps"],
        threshold=SUPER_DEFS["represented_norm"],
    resources:
        mem_mb=1000,
        runtime=5,
    log:
        results("logs/superposition_summary.log"),
    script:
        "../scripts/summarize_superposition.py"


def superposition_figure(name):
    return report(results(f"figures/superposition_{name}.png"), caption=f"../report/superposition_{name}.rst",
                  category="Superposition")


rule plot_superposition_polygons:
    input:
        models=rules.superposition_uniform.output.models,
        features=rules.superposition_uniform.output.features,
    output:
        figure=superposition_figure("polygons"),
    resources:
        mem_mb=500,
        runtime=5,
    log:
        results("logs/plot_superposition_polygons.log"),
    script:
        "../scripts/plot_superposition_polygons.py"


rule plot_superposition_phase_change:
    input:
        models=rules.superposition_nonuniform.output.models,
        features=rules.superposition_nonuniform.output.features,
    output:
        figure=superposition_figure("phase_change"),
    resources:
        mem_mb=500,
        runtime=5,
    log:
        results("logs/plot_superposition_phase_change.log"),
    script:
        "../scripts/plot_superposition_phase_change.py"


rule plot_superposition_loss_crossing:
    input:
        models=rules.superposition_nonuniform.output.models,
        metrics=rules.superposition_summary.output.metrics,
    output:
        figure=superposition_figure("loss_crossing"),
    resources:
        mem_mb=500,
        runtime=5,
    log:
        results("logs/plot_superposition_loss_crossing.log"),
    script:
        "../scripts/plot_superposition_loss_crossing.py"


rule plot_superposition_dimensionality:
    input:
        models=rules.superposition_dimensionality.output.models,
        features=rules.superposition_dimensionality.output.features,
    output:
        figure=superposition_figure("dimensionality"),
    params:
        fractions=SUPER_DEFS["fractions"],
        threshold=SUPER_DEFS["represented_norm"],
    resources:
        mem_mb=500,
        runtime=5,
    log:
        results("logs/plot_superposition_dimensionality.log"),
    script:
        "../scripts/plot_superposition_dimensionality.py"


rule plot_superposition_fraction_histogram:
    input:
        features=rules.superposition_dimensionality.output.features,
        metrics=rules.superposition_summary.output.metrics,
    output:
        figure=superposition_figure("fraction_histogram"),
    params:
        fractions=SUPER_DEFS["fractions"],
        threshold=SUPER_DEFS["represented_norm"],
    resources:
        mem_mb=500,
        runtime=5,
    log:
        results("logs/plot_superposition_fraction_histogram.log"),
    script:
        "../scripts/plot_superposition_fraction_histogram.py"


rule plot_superposition_dimensionality_training:
    input:
        training=rules.superposition_dimensionality.output.training,
        jumps=rules.superposition_dimensionality.output.jumps,
    output:
        figure=superposition_figure("dimensionality_training"),
    params:
        sparsity=SUPER["dimensionality"]["dynamics_sparsity"],
        fractions=SUPER_DEFS["fractions"],
        threshold=SUPER_DEFS["represented_norm"],
    resources:
        mem_mb=1000,
        runtime=5,
    log:
        results("logs/plot_superposition_dimensionality_training.log"),
    script:
        "../scripts/plot_superposition_dimensionality_training.py"


rule plot_superposition_phase_diagram:
    input:
        cells=rules.superposition_phase_diagram.output.cells,
        boundary=rules.superposition_phase_diagram.output.boundary,
    output:
        figure=superposition_figure("phase_diagram"),
    resources:
        mem_mb=500,
        runtime=5,
    log:
        results("logs/plot_superposition_phase_diagram.log"),
    script:
        "../scripts/plot_superposition_phase_diagram.py"


SUPERPOSITION_FIGURES = [results(f"figures/superposition_{name}.png") for name in (
    "polygons", "phase_change", "loss_crossing", "dimensionality", "fraction_histogram", "dimensionality_training",
    "phase_diagram")]


rule superposition:
    """The whole family: tables, metrics/superposition.json and its seven figures."""
    input:
        rules.superposition_summary.output.metrics,
        SUPERPOSITION_FIGURES,
