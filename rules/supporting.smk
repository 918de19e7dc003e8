# The paper's supporting analyses (method.md §7): ablation, final LayerNorm, the feed-forward-only
# endpoint and vector sums, token subspaces, and the criterion. Target: `snakemake --cores all supporting`.
# Reads the core's outputs (models, prompts, prompt activations, search summaries, tuned thresholds).
from tinylens.resources import forward_batch_mb, prompt_row_bytes, subspace_memory

SUPPORTING = config["supporting"]
SUPPORTING_SIZES = SETTINGS["supporting"]
# from the end of the model; checked against the preset (tinylens.supporting.schemas.check_config)
SUBSPACE_STAGES = sorted(SUPPORTING["subspace_stages"], reverse=True)


PROMPT_TABLES = expand(results("strings/prompts_{mode}.parquet"), mode=MODES)


# the per-prompt rules (ablation, final LayerNorm, endpoint): the model, one forward batch, the tables
BATCH_MB, PROMPT_ROW_BYTES = forward_batch_mb(D_MODEL), prompt_row_bytes(D_MODEL)


rule ablation:
    input:
        **model_files("{seed}"),
        prompts=PROMPT_TABLES,
    output:
        table=results("supporting/ablation/seed{seed}.parquet"),
    params:
        modes=MODES,
    threads: 1
    resources:
        # the model and one forward batch; time: 2 full passes, then per block 2 edited passes from that
        # block on and 3 one-token ones, per prompt (about 23 ms at d_model 384 on one core)
        mem_mb=per_row("prompts", 500 + BATCH_MB, PROMPT_ROW_BYTES),
        runtime=per_row("prompts", 5, row_seconds=2e-3 * width_factor(D_MODEL) ** 2),
    log:
        results("logs/ablation_seed{seed}.log"),
    benchmark:
        results("benchmarks/ablation_seed{seed}.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/supporting/ablation.py"


rule final_layernorm:
    input:
        **model_files(ORIGINAL),
        prompts=PROMPT_TABLES,
    output:
        scaling=results("supporting/final_layernorm_scaling.parquet"),
        noise=results("supporting/final_layernorm_noise.parquet"),
    params:
        modes=MODES,
        factors=SUPPORTING["layernorm_factors"],
        levels=SUPPORTING["noise_levels"],
        seed=SUPPORTING["noise_seed"],
    resources:
        mem_mb=per_row("prompts", 500 + BATCH_MB, PROMPT_ROW_BYTES),
        runtime=per_row("prompts", 5, row_seconds=1e-3 * width_factor(D_MODEL) ** 2),
    log:
        results("logs/final_layernorm.log"),
    benchmark:
        results("benchmarks/final_layernorm.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/supporting/final_layernorm.py"


rule ffwd_endpoint:
    input:
        **model_files(ORIGINAL),
        prompts=PROMPT_TABLES,
    output:
        table=results("supporting/ffwd_endpoint.parquet"),
    params:
        modes=MODES,
    resources:
        mem_mb=per_row("prompts", 500 + BATCH_MB, PROMPT_ROW_BYTES),
        runtime=per_row("prompts", 5, row_seconds=1e-3 * width_factor(D_MODEL) ** 2),
    log:
        results("logs/ffwd_endpoint.log"),
    benchmark:
        results("benchmarks/ffwd_endpoint.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/supporting/ffwd_endpoint.py"


rule block_contributions:
    """Attention against feed-forward output per block over every evaluation prompt (method.md §7),
    read from the prompt dumps: no forward pass."""
    input:
        **model_files(ORIGINAL, "config"),
        prompts=PROMPT_TABLES,
        prompt_blocks=[
            results(f"activations/seed{ORIGINAL}/prompts_{mode}/block{b}.parquet")
            for mode in MODES
            for b in range(N_LAYER)
        ],
    output:
        table=results("supporting/block_contributions.parquet"),
    params:
        modes=MODES,
    resources:
        # one mode's three kinds of every block as float64, twice: about 6 x 3 x 2 x 8 x d_model bytes a prompt
        mem_mb=per_row("prompts", 500, 300 * D_MODEL),
        runtime=5,
    log:
        results("logs/block_contributions.log"),
    benchmark:
        results("benchmarks/block_contributions.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/supporting/block_contributions.py"


rule vector_sums:
    input:
        **model_files(ORIGINAL),
    output:
        paths=results("supporting/vector_sums.json"),
    params:
        prompts=config["case_study_prompts"],
        length=config["substring_length"],
    resources:
        mem_mb=600,
        runtime=5,
    log:
        results("logs/vector_sums.log"),
    benchmark:
        results("benchmarks/vector_sums.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/supporting/vector_sums.py"


rule token_subspaces:
    """Every configured stage in one job (stage after stage): each job would spend more starting up
    than learning on the smaller presets."""
    input:
        **model_files(ORIGINAL),
    output:
        vectors=expand(results("supporting/subspaces/stage{stage}.safetensors"), stage=SUBSPACE_STAGES),
        tokens=expand(results("supporting/subspaces/stage{stage}.parquet"), stage=SUBSPACE_STAGES),
        mixtures=expand(results("supporting/subspaces/stage{stage}_mixtures.parquet"), stage=SUBSPACE_STAGES),
    params:
        stages=SUBSPACE_STAGES,
        samples=SUPPORTING_SIZES["subspace_samples"],
        steps=SUPPORTING_SIZES["subspace_steps"],
        lr=SUPPORTING_SIZES["subspace_lr"],
        weight_decay=SUPPORTING["subspace_weight_decay"],
        target_nll=SUPPORTING["subspace_target_nll"],
        plateau=SUPPORTING["subspace_plateau"],
        seed=SUPPORTING["subspace_seed"],
        pairs=SUPPORTING["mixture_pairs"],
        device=config["device"],
    threads: SUPPORTING_SIZES["subspace_threads"]
    resources:
        mem_mb=subspace_memory(SUPPORTING_SIZES["subspace_samples"], D_MODEL),
        # the paper preset's 4 x 50,000 steps are meant for a GPU
        runtime=10 + len(SUBSPACE_STAGES) * SUPPORTING_SIZES["subspace_steps"] // 400,
        gpu=TRAIN["resources"]["gpu"],
    log:
        results("logs/token_subspaces.log"),
    benchmark:
        results("benchmarks/token_subspaces.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/supporting/token_subspaces.py"


rule criterion:
    input:
        **model_files(ORIGINAL, "config", "tokenizer"),
        shards=search_shards(),
        prompts=results("strings/prompts_{mode}.parquet"),
        # the paper mode has no tuning prompts: it uses the thresholds its evaluation uses
        tuned=lambda wc: results(f"approx/{TUNED_WITH[wc.mode]}/tuned.json"),
        # the single-block sweep of the same tuning prompts: each block's own best threshold (method.md §6b)
        sweep=lambda wc: results(f"approx/{TUNED_WITH[wc.mode]}/threshold_sweep.csv"),
        prompt_blocks=[results(f"activations/seed{ORIGINAL}/prompts_{{mode}}/block{b}.parquet") for b in range(N_LAYER)],
        subspaces=rules.token_subspaces.output.vectors,
    output:
        table=results("supporting/criterion_{mode}.parquet"),
        summary=results("supporting/criterion_{mode}.json"),
    params:
        settings=SUPPORTING["criterion"],
        mode=lambda wc: wc.mode,
        grid=config["threshold_grid"],
    resources:
        # per prompt: blocks x bins x vocab counts, their cumulative sums and copies (int64)
        mem_mb=per_row("prompts", 500, vocab_bytes=4 * 8 * N_LAYER * N_BINS),
        runtime=per_row("prompts", 5, row_seconds=0.05),
    log:
        results("logs/criterion_{mode}.log"),
    benchmark:
        results("benchmarks/criterion_{mode}.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/supporting/criterion.py"


ROBUSTNESS = SUPPORTING_SIZES["robustness"]


rule approx_robustness:
    """The approximation with Euclidean distance and with other string lengths, beside the default, on the
    same held-out prompts (method.md §7): the strings of a slice of the train text, run through the model here."""
    input:
        **model_files(ORIGINAL),
        train=rules.tokenize.output.train,
        val=rules.tokenize.output.val,
    output:
        table=results("supporting/robustness.parquet"),
        summary=results("supporting/robustness.json"),
    params:
        shared=SUPPORTING["robustness"],
        sizes=ROBUSTNESS,
        length=config["substring_length"],
        tune_fraction=ANALYSIS["tune_fraction"],
        grid=config["threshold_grid"],
        paper=config["paper_baseline"],
        rounds=ANALYSIS["tune_rounds"],
    threads: 1
    resources:
        # the interpreter with torch and the model (about 700 MB: 846-852 MB measured at the test preset's
        # 40 prompts x 20,000 characters), one block's [prompts strings] float64 scores and their temporaries
        # (about 160 bytes a prompt and string: 2,046 MB measured at 200 x 50,000, small), and the activations
        mem_mb=900 + (160 * ROBUSTNESS["prompts"] + 4 * N_LAYER * D_MODEL) * ROBUSTNESS["text_chars"] // 10**6,
        # 58 CPU-s measured at the small preset (200 prompts, 50,000 characters, lengths 5, 10, 15)
        runtime=10,
    log:
        results("logs/approx_robustness.log"),
    benchmark:
        results("benchmarks/approx_robustness.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/supporting/approx_robustness.py"


rule supporting_metrics:
    input:
        **model_files(ORIGINAL, "config"),
        ablation=expand(results("supporting/ablation/seed{seed}.parquet"), seed=SEEDS),
        scaling=rules.final_layernorm.output.scaling,
        noise=rules.final_layernorm.output.noise,
        endpoint=rules.ffwd_endpoint.output.table,
        contributions=rules.block_contributions.output.table,
        subspaces=rules.token_subspaces.output.tokens,
        criterion=expand(results("supporting/criterion_{mode}.json"), mode=MODES),
        robustness=rules.approx_robustness.output.summary,
    output:
        metrics=metrics_file("supporting"),
    params:
        seeds=SEEDS,
        modes=MODES,
        n_blocks=N_LAYER,
        stages=SUBSPACE_STAGES,
        target_nll=SUPPORTING["subspace_target_nll"],
        samples=SUPPORTING_SIZES["subspace_samples"],
    resources:
        # the ablation tables as Python columns: about 1 kB per row
        mem_mb=per_row("ablation", 500, 1000),
        runtime=5,
    log:
        results("logs/supporting_metrics.log"),
    benchmark:
        results("benchmarks/supporting_metrics.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/supporting/supporting_metrics.py"


SUPPORTING_FIGURES = figures(
    "Supporting analyses",
    family="supporting",
    ablation=dict(input=dict(metrics=rules.supporting_metrics.output.metrics)),
    final_layernorm=dict(
        input=dict(scaling=rules.final_layernorm.output.scaling, noise=rules.final_layernorm.output.noise)
    ),
    ffwd_endpoint=dict(input=dict(table=rules.ffwd_endpoint.output.table)),
    attention_vs_ffwd=dict(input=dict(table=rules.block_contributions.output.table)),
    vector_sums=dict(input=dict(paths=rules.vector_sums.output.paths)),
    token_subspaces=dict(
        input=dict(
            tokens=rules.token_subspaces.output.tokens,
            mixtures=rules.token_subspaces.output.mixtures,
            **model_files(ORIGINAL, "tokenizer"),
        ),
        params=dict(n_layer=N_LAYER),
    ),
    criterion=dict(input=dict(metrics=rules.supporting_metrics.output.metrics)),
    robustness=dict(input=dict(summary=rules.approx_robustness.output.summary)),
)


# The family's outputs: rule all and the target `supporting` ask for these.
SUPPORTING_TARGETS = [
    *SUPPORTING_FIGURES,
    rules.supporting_metrics.output.metrics,
    # intermediates too: `rule all` then notices one deleted or lost with a failed job
    expand(rules.ablation.output, seed=SEEDS),
    rules.final_layernorm.output,
    rules.ffwd_endpoint.output,
    rules.block_contributions.output,
    rules.approx_robustness.output,
    rules.vector_sums.output,
    rules.token_subspaces.output,
    expand(rules.criterion.output, mode=MODES),
]


rule supporting:
    """This family alone, on top of the core: `snakemake --cores all supporting`."""
    input:
        SUPPORTING_TARGETS,
