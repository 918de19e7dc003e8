from tinylens.resources import total


rule tune_approximation:
    wildcard_constraints:
        mode="|".join(TUNED_MODES),  # the paper mode has no tuning prompts
    input:
        **model_files(ORIGINAL, "config"),
        shards=search_shards(),
        prompts=results("strings/prompts_{mode}.parquet"),
        logits=results(f"activations/seed{ORIGINAL}/prompts_{{mode}}/logits.parquet"),
    output:
        tuned=results("approx/{mode}/tuned.json"),
        sweep=results("approx/{mode}/threshold_sweep.csv"),
    params:
        mode=lambda wc: wc.mode,
        grid=config["threshold_grid"],
        paper=config["paper_baseline"],
        rounds=ANALYSIS["tune_rounds"],
    resources:
        # per prompt: blocks x bins x vocab counts, uint32 summed in place and the chosen thresholds'
        # float64 copies (12 bytes per count measured at 20,000 prompts, paper_short; 32 declared)
        mem_mb=per_row("prompts", 500, vocab_bytes=32 * N_LAYER * N_BINS),
        runtime=per_row("prompts", 5, row_seconds=0.02 * ANALYSIS["tune_rounds"]),
    log:
        results("logs/tune_approximation_{mode}.log"),
    benchmark:
        results("benchmarks/tune_approximation_{mode}.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/core/tune_approximation.py"


rule evaluate:
    input:
        **model_files(ORIGINAL, "config"),
        shards=search_shards(),
        prompts=results("strings/prompts_{mode}.parquet"),
        strings=rules.build_strings.output.strings,
        # the paper mode has no tuning prompts: it is evaluated with the corpus mode's tuned values
        tuned=lambda wc: results(f"approx/{TUNED_WITH[wc.mode]}/tuned.json"),
        # the single-block sweep of the same tuning prompts: each block's own best threshold (method.md §6b)
        sweep=lambda wc: results(f"approx/{TUNED_WITH[wc.mode]}/threshold_sweep.csv"),
        logits=expand(results("activations/seed{seed}/prompts_{{mode}}/logits.parquet"), seed=SEEDS),
    output:
        table=results("evaluation/{mode}/hellinger.parquet"),
        summary=results("metrics/hellinger_{mode}.json"),
    params:
        mode=lambda wc: wc.mode,
        tuned_with=lambda wc: TUNED_WITH[wc.mode],
        grid=config["threshold_grid"],
        seeds=SEEDS,
        original=ORIGINAL,
    resources:
        # the string table (for in_train), and per prompt blocks x bins x vocab counts (uint32 summed in
        # place: 6 bytes per count measured at 20,000 prompts, paper_short; 24 declared)
        mem_mb=total(per_row("strings", 550, STRING_BYTES), per_row("prompts", 0, vocab_bytes=24 * N_LAYER * N_BINS)),
        runtime=5,
    log:
        results("logs/evaluate_{mode}.log"),
    benchmark:
        results("benchmarks/evaluate_{mode}.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/core/evaluate.py"


rule case_studies:
    input:
        **model_files(ORIGINAL),
        strings=rules.build_strings.output.strings,
        string_blocks=activations(ORIGINAL, "strings")["blocks"],
        string_logits=activations(ORIGINAL, "strings")["logits"],
        tuned=results("approx/corpus/tuned.json"),
    output:
        summary=results("case_studies/summary.json"),
        matches=results("case_studies/matches.parquet"),
    params:
        prompts=config["case_study_prompts"],
        length=config["substring_length"],
        min_cosine=config["threshold_grid"]["start"],
    resources:
        mem_mb=per_row("strings", 450, STRING_BYTES + STRING_VALUE_BYTES * D_MODEL),
        runtime=per_row("strings", 5, row_seconds=1e-5 * N_LAYER),
    log:
        results("logs/case_studies.log"),
    benchmark:
        results("benchmarks/case_studies.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/core/case_studies.py"


rule hellinger_summary:
    input:
        summaries=expand(results("metrics/hellinger_{mode}.json"), mode=MODES),
        training=rules.training_summary.output.summary,
    output:
        summary=metrics_file("core", "hellinger"),
        headline=results("metrics/headline.json"),
    params:
        modes=MODES,
    resources:
        mem_mb=400,
        runtime=5,
    log:
        results("logs/hellinger_summary.log"),
    benchmark:
        results("benchmarks/hellinger_summary.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/core/hellinger_summary.py"
