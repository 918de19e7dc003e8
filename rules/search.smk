rule search_shard:
    input:
        strings=rules.build_strings.output.strings,
        prompts=results("strings/prompts_{mode}.parquet"),
        model_config=results(f"models/seed{ORIGINAL}/config.json"),
        string_blocks=activations(ORIGINAL, "strings")["blocks"],
        string_logits=activations(ORIGINAL, "strings")["logits"],
        prompt_blocks=[results(f"activations/seed{ORIGINAL}/prompts_{{mode}}/block{b}.parquet") for b in range(N_LAYER)],
        prompt_logits=results(f"activations/seed{ORIGINAL}/prompts_{{mode}}/logits.parquet"),
    output:
        # Each shard is its own job and file: a killed run redoes only the unfinished shards.
        shard=results("search/{mode}/shard_{scatteritem}.parquet"),
    params:
        mode=lambda wc: wc.mode,
        # {scatteritem} is "<i>-of-<n>", from the scattergather directive in common.smk.
        shard=lambda wc: int(wc.scatteritem.split("-of-")[0]),
        n_shards=ANALYSIS["search_shards"],
        grid=config["threshold_grid"],
        device=config["device"],
    threads: ANALYSIS["search_threads"]
    resources:
        mem_mb=8000,
        runtime=120,
        gpu=TRAIN["resources"]["gpu"],
    log:
        results("logs/search_{mode}_{scatteritem}.log"),
    benchmark:
        results("benchmarks/search_{mode}_{scatteritem}.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/search_shard.py"


rule verify_search:
    input:
        strings=rules.build_strings.output.strings,
        model_config=results(f"models/seed{ORIGINAL}/config.json"),
        string_blocks=activations(ORIGINAL, "strings")["blocks"],
        string_logits=activations(ORIGINAL, "strings")["logits"],
        prompts_corpus=results("strings/prompts_corpus.parquet"),
        prompts_heldout=results("strings/prompts_heldout.parquet"),
        prompt_logits=[activations(ORIGINAL, s)["logits"] for s in PROMPT_SETS],
        prompt_blocks=[f for s in PROMPT_SETS for f in activations(ORIGINAL, s)["blocks"]],
        corpus_shards=gather.search(results("search/corpus/shard_{scatteritem}.parquet")),
        heldout_shards=gather.search(results("search/heldout/shard_{scatteritem}.parquet")),
    output:
        report=results("metrics/search_verification.json"),
    params:
        modes=MODES,
        n_prompts=ANALYSIS["verify_prompts"],
        seed=config["prompt_seed"],
        grid=config["threshold_grid"],
    resources:
        mem_mb=8000,
    log:
        results("logs/verify_search.log"),
    benchmark:
        results("benchmarks/verify_search.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/verify_search.py"
