SEARCH_SHARDS = gather.search(results("search/{{mode}}/shard_{scatteritem}.parquet"))


rule tune_approximation:
    input:
        shards=SEARCH_SHARDS,
        prompts=results("strings/prompts_{mode}.parquet"),
        model_config=results(f"models/seed{ORIGINAL}/config.json"),
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
        mem_mb=4000,
        runtime=30,
    log:
        results("logs/tune_approximation_{mode}.log"),
    benchmark:
        results("benchmarks/tune_approximation_{mode}.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/tune_approximation.py"


rule evaluate:
    input:
        shards=SEARCH_SHARDS,
        prompts=results("strings/prompts_{mode}.parquet"),
        tuned=rules.tune_approximation.output.tuned,
        model_config=results(f"models/seed{ORIGINAL}/config.json"),
        logits=expand(results("activations/seed{seed}/prompts_{{mode}}/logits.parquet"), seed=SEEDS),
    output:
        table=results("evaluation/{mode}/hellinger.parquet"),
        summary=results("metrics/hellinger_{mode}.json"),
    params:
        mode=lambda wc: wc.mode,
        grid=config["threshold_grid"],
        seeds=SEEDS,
        original=ORIGINAL,
    log:
        results("logs/evaluate_{mode}.log"),
    benchmark:
        results("benchmarks/evaluate_{mode}.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/evaluate.py"


rule case_studies:
    input:
        weights=results(f"models/seed{ORIGINAL}/model.safetensors"),
        tokenizer=results(f"models/seed{ORIGINAL}/tokenizer.json"),
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
        mem_mb=4000,
    log:
        results("logs/case_studies.log"),
    benchmark:
        results("benchmarks/case_studies.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/case_studies.py"


rule hellinger_summary:
    input:
        summaries=expand(results("metrics/hellinger_{mode}.json"), mode=MODES),
        training=rules.training_summary.output.summary,
    output:
        summary=results("metrics/hellinger.json"),
        headline=results("metrics/headline.json"),
    params:
        modes=MODES,
    log:
        results("logs/hellinger_summary.log"),
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/hellinger_summary.py"
