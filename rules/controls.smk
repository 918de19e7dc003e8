# The controls of the core claim (method.md §6b): is it the feed-forward outputs? Other sources of next-token
# counts, approximated, tuned and evaluated as the approximation is, each paired with it on the same prompts; part
# of the target `core`. The permuted null's sums come from the search itself (rule search_shard).
from tinylens.resources import total


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
        # Python, torch and the text (about 700 MB), and per prompt row of the three modes the null's counts twice
        # (uint32, the stacked tuning rows) and the suffix counts (int64, twice): 891 MB measured at small
        mem_mb=per_row([f"prompts_{mode}" for mode in CONTROL_INPUT_MODES], 700, vocab_bytes=8 * N_LAYER * N_BINS + 160),
        # four tunings (two sources, two modes) and the suffix counts: 5-8 CPU-s measured at small
        runtime=per_row(
            [f"prompts_{mode}" for mode in CONTROL_INPUT_MODES], 5, row_seconds=0.01 * ANALYSIS["tune_rounds"]
        ),
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
        # Python, torch and the model (about 750 MB), the sample's three kinds of every block (float32, and the
        # block output's copy), and per prompt row of the modes the counts above every edge of up to six kinds'
        # blocks at once (uint32: a kind searched, the twelve terms, the tuning rows' copies): 1,290 MB measured
        # at small (25,000 strings, 2,500 prompt rows)
        mem_mb=total(
            lambda wildcards, input: 750 + ANALYSIS["control_strings"] * 14 * N_LAYER * D_MODEL // 2**20,
            per_row([f"prompts_{mode}" for mode in CONTROL_INPUT_MODES], 0, vocab_bytes=16 * N_LAYER * N_BINS),
        ),
        # the forward pass of the sample and ten tunings (22-24 CPU-s measured at small on one thread)
        runtime=per_row(
            [f"prompts_{mode}" for mode in CONTROL_INPUT_MODES], 10, row_seconds=0.05 * ANALYSIS["tune_rounds"]
        ),
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
