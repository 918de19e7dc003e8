rule search_shard:
    input:
        **model_files(ORIGINAL, "config"),
        strings=rules.build_strings.output.strings,
        prompts=results("strings/prompts_{mode}.parquet"),
        string_blocks=activations(ORIGINAL, "strings")["blocks"],
        string_logits=activations(ORIGINAL, "strings")["logits"],
        prompt_blocks=[results(f"activations/seed{ORIGINAL}/prompts_{{mode}}/block{b}.parquet") for b in range(N_LAYER)],
        prompt_logits=results(f"activations/seed{ORIGINAL}/prompts_{{mode}}/logits.parquet"),
    output:
        # Each shard is its own job and file: a killed run redoes only the unfinished shards.
        shard=results("search/{mode}/shard_{scatteritem}.parquet"),
        # the permuted null's sums from the same pass (method.md §6b): the same matches, the counts permuted
        null=results("search/{mode}/null/shard_{scatteritem}.parquet"),
    params:
        mode=lambda wc: wc.mode,
        # {scatteritem} is "<i>-of-<n>", from the scattergather directive in common.smk.
        shard=lambda wc: int(wc.scatteritem.split("-of-")[0]),
        n_shards=ANALYSIS["search_shards"],
        grid=config["threshold_grid"],
        null_seed=CONTROLS["null_seed"],
        device=config["device"],
    threads: ANALYSIS["search_threads"]
    resources:
        mem_mb=per_row("strings", 600, STRING_BYTES + STRING_VALUE_BYTES * D_MODEL),
        runtime=per_row("strings", 5, row_seconds=2e-7 * PROMPTS_PER_SHARD * N_LAYER * width_factor(D_MODEL)),
        gpu=TRAIN["resources"]["gpu"],
    log:
        results("logs/search_{mode}_{scatteritem}.log"),
    benchmark:
        results("benchmarks/search_{mode}_{scatteritem}.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/core/search_shard.py"


rule verify_search:
    input:
        **{f"prompts_{mode}": results(f"strings/prompts_{mode}.parquet") for mode in MODES},
        **{f"prompt_logits_{mode}": activations(ORIGINAL, f"prompts_{mode}")["logits"] for mode in MODES},
        **{f"shards_{mode}": search_shards(mode) for mode in MODES},
        **model_files(ORIGINAL, "config"),
        strings=rules.build_strings.output.strings,
        string_blocks=activations(ORIGINAL, "strings")["blocks"],
        string_logits=activations(ORIGINAL, "strings")["logits"],
        prompt_blocks=[f for s in PROMPT_SETS for f in activations(ORIGINAL, s)["blocks"]],
    output:
        report=results("metrics/search_verification.json"),
    params:
        modes=MODES,
        n_prompts=ANALYSIS["verify_prompts"],
        seed=config["prompt_seed"],
        grid=config["threshold_grid"],
    resources:
        # one block of strings and its unit copy (float32; 4.8 bytes per value measured at paper_short,
        # 8 declared); the float64 brute force holds a few [verify_prompts strings] matrices
        mem_mb=per_row("strings", 600, STRING_BYTES + 8 * D_MODEL + 56 * ANALYSIS["verify_prompts"]),
        runtime=per_row("strings", 5, row_seconds=2e-6 * ANALYSIS["verify_prompts"] * N_LAYER * len(MODES)),
    log:
        results("logs/verify_search.log"),
    benchmark:
        results("benchmarks/verify_search.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/core/verify_search.py"
