# External models through TransformerLens (method.md §13, docs/external.md): every checkpoint of each model
# named by `external` (entries of `external_models`) measured as our seeds are: training dynamics (§8) and
# weight-only composition (§9); the same tables, metrics and figures, by the same summary and figure scripts,
# under results/<preset>/external/<model>/; with an integrity gate (checkpoints repeating weights are reported
# and left out of detection) and §8b's induction-head onset. Target: `snakemake --cores all external_models`
# (needs the `tl` extra: pip install -e ".[tl]"); not in `rule all`.
wildcard_constraints:
    name="|".join(map(re.escape, EXTERNAL_MODELS)) or "^$",


rule external_measure:
    input:
        external_available,
        corpus=rules.download_corpus.output.corpus,
    output:
        config=external("model/config.json"),
        checkpoints=external(f"dynamics/seed{EXTERNAL_SEED}/checkpoints.parquet"),
        heads=external(f"dynamics/seed{EXTERNAL_SEED}/heads.parquet"),
        onset=external(f"dynamics/seed{EXTERNAL_SEED}/onset.parquet"),
        onset_heads=external(f"dynamics/seed{EXTERNAL_SEED}/onset_heads.parquet"),
        over_training=external(f"circuits/seed{EXTERNAL_SEED}/over_training.parquet"),
        scores=external(f"circuits/seed{EXTERNAL_SEED}/scores.parquet"),
    params:
        model=external_settings("model"),
        revision=external_settings("revision"),
        steps=external_settings("steps"),
        tokens_per_step=external_settings("tokens_per_step"),
        corpus_chars=external_settings("corpus_chars"),
        train_fraction=external_settings("train_fraction"),
        context=external_settings("context"),
        measure=lambda wc: EXTERNAL_MODELS[wc.name]["dynamics"]["measure"],
        onset=external_settings("onset"),
        stream=external_settings("stream"),
        scratch=external("stream"),  # stream: true: the one or two fetched checkpoints, removed at the end
        samples=lambda wc: EXTERNAL_MODELS[wc.name]["composition"]["baseline_samples"],
        baseline_seed=lambda wc: EXTERNAL_MODELS[wc.name]["composition"]["baseline_seed"],
        device=config["device"],
    threads: lambda wc: EXTERNAL_MODELS[wc.name]["dynamics"]["threads"]
    resources:
        mem_mb=lambda wc: EXTERNAL_MODELS[wc.name]["dynamics"]["resources"]["mem_mb"],
        runtime=lambda wc: EXTERNAL_MODELS[wc.name]["dynamics"]["resources"]["runtime"],
        gpu=lambda wc: EXTERNAL_MODELS[wc.name]["dynamics"]["resources"]["gpu"],
    log:
        external("logs/external_measure.log"),
    benchmark:
        external("benchmarks/external_measure.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/external/external_measure.py"


# The summary of our seeds on the external model's tables (its one "seed" is EXTERNAL_SEED), on the checkpoints
# whose weights are distinct (the integrity report says which are not), with §8b's induction-head onset.
rule external_dynamics_summary:
    input:
        checkpoints=rules.external_measure.output.checkpoints,
        heads=rules.external_measure.output.heads,
        onset=rules.external_measure.output.onset,
        onset_heads=rules.external_measure.output.onset_heads,
        config=rules.external_measure.output.config,
    output:
        summary=external("metrics/dynamics.json"),
    params:
        seed=EXTERNAL_SEED,
        model=external_settings("model"),
        revision=external_settings("revision"),
        steps=external_settings("steps"),
        tokens_per_step=external_settings("tokens_per_step"),
        phases=lambda wc: EXTERNAL_MODELS[wc.name]["dynamics"]["phases"],
        repeat_length=lambda wc: EXTERNAL_MODELS[wc.name]["dynamics"]["measure"]["repeat"]["length"],
        repeat_copies=lambda wc: EXTERNAL_MODELS[wc.name]["dynamics"]["measure"]["repeat"]["copies"],
        keep_duplicates=lambda wc: EXTERNAL_MODELS[wc.name]["integrity"]["keep_duplicates"],
        onset=external_settings("onset"),
    resources:
        mem_mb=1000,
        runtime=5,
    log:
        external("logs/external_dynamics_summary.log"),
    benchmark:
        external("benchmarks/external_dynamics_summary.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/external/external_dynamics_summary.py"


# The circuits family's summary on the external model's tables (the last checkpoint's scores, K-composition
# over the checkpoints); no symmetry test (it reruns our own architecture): its keys say so.
rule external_circuits_summary:
    input:
        scores=[rules.external_measure.output.scores],
        over_training=[rules.external_measure.output.over_training],
        config=rules.external_measure.output.config,
    output:
        metrics=external("metrics/circuits.json"),
    params:
        seeds=[EXTERNAL_SEED],
        original=EXTERNAL_SEED,
        top_pairs=lambda wc: EXTERNAL_MODELS[wc.name]["composition"]["top_pairs"],
    resources:
        mem_mb=600,
        runtime=5,
    log:
        external("logs/external_circuits_summary.log"),
    benchmark:
        external("benchmarks/external_circuits_summary.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/circuits/circuits_summary.py"


# The figures of our seeds, drawn by the same scripts from the external model's tables: rows of the figure
# table (figures() in rules/common.smk; rules/figures.smk makes the rules external_plot_<figure>).
EXTERNAL_TABLES = dict(
    checkpoints=[rules.external_measure.output.checkpoints],
    heads=[rules.external_measure.output.heads],
    summary=rules.external_dynamics_summary.output.summary,
    config=rules.external_measure.output.config,
)
EXTERNAL_ONE = dict(
    EXTERNAL_TABLES, checkpoints=rules.external_measure.output.checkpoints, heads=rules.external_measure.output.heads
)
EXTERNAL_FIGURES = figures(
    "External models",
    mem_mb=1000,
    under=external,
    prefix="external_",
    dynamics_energy_kl=dict(input=EXTERNAL_TABLES, params=dict(seeds=[EXTERNAL_SEED])),
    dynamics_icl_score=dict(
        input=EXTERNAL_TABLES,
        params=dict(
            seeds=[EXTERNAL_SEED],
            original=EXTERNAL_SEED,
            icl_positions=lambda wc: EXTERNAL_MODELS[wc.name]["dynamics"]["measure"]["icl_positions"],
            icl_bands=lambda wc: EXTERNAL_MODELS[wc.name]["dynamics"]["measure"]["icl_bands"],
        ),
    ),
    dynamics_loss_by_position=dict(
        input=EXTERNAL_ONE,
        params=dict(
            original=EXTERNAL_SEED,
            smooth_decades=lambda wc: EXTERNAL_MODELS[wc.name]["dynamics"]["loss_by_position"]["smooth_decades"],
        ),
    ),
    dynamics_head_scores=dict(input=EXTERNAL_ONE, params=dict(original=EXTERNAL_SEED)),
    dynamics_energy_depth=dict(input=EXTERNAL_TABLES, params=dict(seeds=[EXTERNAL_SEED], original=EXTERNAL_SEED)),
    composition_heatmaps=dict(
        input=dict(scores=rules.external_measure.output.scores, config=rules.external_measure.output.config)
    ),
    composition_over_training=dict(
        input=dict(
            tables=[rules.external_measure.output.over_training],
            dynamics=rules.external_dynamics_summary.output.summary,
        ),
        params=dict(
            seeds=[EXTERNAL_SEED],
            original=EXTERNAL_SEED,
            top_pairs=lambda wc: EXTERNAL_MODELS[wc.name]["composition"]["top_pairs"],
        ),
    ),
)


# The model's findings in words, by the code and with the sentences of our run's findings where they apply.
rule external_findings:
    input:
        dynamics=rules.external_dynamics_summary.output.summary,
        circuits=rules.external_circuits_summary.output.metrics,
    output:
        findings=external("findings.md"),
    params:
        preset=PRESET,
        model=external_settings("model"),
    resources:
        mem_mb=600,
        runtime=5,
    log:
        external("logs/external_findings.log"),
    benchmark:
        external("benchmarks/external_findings.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/external/external_findings.py"


rule external_models:
    input:
        expand(EXTERNAL_FIGURES, name=EXTERNAL_NAMES),
        expand(rules.external_dynamics_summary.output.summary, name=EXTERNAL_NAMES),
        expand(rules.external_circuits_summary.output.metrics, name=EXTERNAL_NAMES),
        expand(rules.external_findings.output, name=EXTERNAL_NAMES),
        expand(rules.external_measure.output, name=EXTERNAL_NAMES),
