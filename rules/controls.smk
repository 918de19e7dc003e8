# The controls of the core claim (method.md §6b): is it the feed-forward outputs? Other sources of next-token
# counts, approximated, tuned and evaluated as the approximation is, each paired with it on the same prompts; part
# of the target `core`. The permuted null's sums come from the search itself (rule search_shard).
rule full_set_controls:
    """Over every string: the suffix counts (no network) and the permuted null (the search's second count matrix)."""
    input:
        **control_prompts(),
        **{f"null_{mode}": null_shards(mode) for mode in CONTROL_INPUT_MODES},
        **model_files(ORIGINAL, "config"),
        tokenizer=rules.tokenize.output.tokenizer,
        train=rules.tokenize.output.train,
        val=rules.tokenize.output.val,
    output:
        table=results("controls/full_set.parquet"),
        tuned=results("controls/full_set.json"),
    params:
        modes=CONTROL_MODES,
        tuned_with=CONTROL_TUNED_WITH,
        suffix_lengths=CONTROLS["suffix_lengths"],
        null_seed=CONTROLS["null_seed"],
        grid=config["threshold_grid"],
        paper=config["paper_baseline"],
        rounds=ANALYSIS["tune_rounds"],
    resources:
        mem_mb=1500,
        runtime=10,
    log:
        results("logs/full_set_controls.log"),
    benchmark:
        results("benchmarks/full_set_controls.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/core/full_set_controls.py"


rule vector_controls:
    """sa_out, the block's input and output, ffwd_out + sa_out, and ffwd_out itself, over a sample of the strings."""
    input:
        **control_prompts(),
        **model_files(ORIGINAL),
        prompt_blocks=[f for mode in CONTROL_INPUT_MODES for f in activations(ORIGINAL, f"prompts_{mode}")["blocks"]],
        strings=rules.build_strings.output.strings,
    output:
        table=results("controls/vectors.parquet"),
        tuned=results("controls/vectors.json"),
    params:
        modes=CONTROL_MODES,
        tuned_with=CONTROL_TUNED_WITH,
        strings=ANALYSIS["control_strings"],
        seed=CONTROLS["strings_seed"],
        grid=config["threshold_grid"],
        paper=config["paper_baseline"],
        rounds=ANALYSIS["tune_rounds"],
        device=config["device"],
    threads: 1  # the forward pass costs 1.8-2.5x the CPU on two threads (docs/benchmarks.md); the search scales
    resources:
        mem_mb=3000,
        runtime=20,
        gpu=TRAIN["resources"]["gpu"],
    log:
        results("logs/vector_controls.log"),
    benchmark:
        results("benchmarks/vector_controls.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/core/vector_controls.py"


rule controls_summary:
    input:
        full_set=rules.full_set_controls.output.table,
        full_set_tuned=rules.full_set_controls.output.tuned,
        vectors=rules.vector_controls.output.table,
        vectors_tuned=rules.vector_controls.output.tuned,
        evaluations=[results(f"evaluation/{mode}/hellinger.parquet") for mode in CONTROL_MODES],
        summaries=[results(f"metrics/hellinger_{mode}.json") for mode in CONTROL_MODES],
    output:
        metrics=metrics_file("core", "controls"),
    params:
        modes=CONTROL_MODES,
        alternates=ALTERNATES,
        n_blocks=N_LAYER,
    resources:
        mem_mb=500,
        runtime=5,
    log:
        results("logs/controls_summary.log"),
    benchmark:
        results("benchmarks/controls_summary.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/core/controls_summary.py"


CONTROLS_FIGURES = figures(
    "Approximation",
    family="core",
    controls=dict(input=dict(metrics=rules.controls_summary.output.metrics)),
)


# The controls' outputs: the target `core` (and so `rule all`) asks for these, intermediates too.
CONTROLS_TARGETS = [
    *CONTROLS_FIGURES,
    rules.controls_summary.output.metrics,
    rules.full_set_controls.output,
    rules.vector_controls.output,
]
