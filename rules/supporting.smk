# The paper's supporting analyses (method.md §7): ablation, final LayerNorm, the feed-forward-only
# endpoint and vector sums, token subspaces, and the criterion. Target: `snakemake --cores all supporting`.
# Reads the core's outputs (models, prompts, prompt activations, search summaries, tuned thresholds).
from tinylens.supporting.subspaces import check_stages

SUPPORTING = config["supporting"]
SUPPORTING_SIZES = SETTINGS["supporting"]
SUBSPACE_STAGES = check_stages(SUPPORTING["subspace_stages"], N_LAYER, "supporting.subspace_stages")


PROMPT_TABLES = expand(results("strings/prompts_{mode}.parquet"), mode=MODES)


wildcard_constraints:
    stage=r"\d+",


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
        mem_mb=2000,
        runtime=30,
    log:
        results("logs/ablation_seed{seed}.log"),
    benchmark:
        results("benchmarks/ablation_seed{seed}.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/ablation.py"


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
        mem_mb=2000,
        runtime=10,
    log:
        results("logs/final_layernorm.log"),
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/final_layernorm.py"


rule ffwd_endpoint:
    input:
        **model_files(ORIGINAL),
        prompts=PROMPT_TABLES,
    output:
        table=results("supporting/ffwd_endpoint.parquet"),
    params:
        modes=MODES,
    resources:
        mem_mb=2000,
        runtime=10,
    log:
        results("logs/ffwd_endpoint.log"),
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/ffwd_endpoint.py"


rule vector_sums:
    input:
        **model_files(ORIGINAL),
    output:
        paths=results("supporting/vector_sums.json"),
    params:
        prompts=config["case_study_prompts"],
        length=config["substring_length"],
    resources:
        mem_mb=1000,
        runtime=5,
    log:
        results("logs/vector_sums.log"),
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/vector_sums.py"


rule token_subspaces:
    input:
        **model_files(ORIGINAL),
    output:
        vectors=results("supporting/subspaces/stage{stage}.safetensors"),
        tokens=results("supporting/subspaces/stage{stage}.parquet"),
        mixtures=results("supporting/subspaces/stage{stage}_mixtures.parquet"),
    params:
        stage=lambda wc: int(wc.stage),
        samples=SUPPORTING_SIZES["subspace_samples"],
        steps=SUPPORTING_SIZES["subspace_steps"],
        lr=SUPPORTING_SIZES["subspace_lr"],
        weight_decay=SUPPORTING["subspace_weight_decay"],
        target_nll=SUPPORTING["subspace_target_nll"],
        seed=SUPPORTING["subspace_seed"],
        pairs=SUPPORTING["mixture_pairs"],
        device=config["device"],
    threads: SUPPORTING_SIZES["subspace_threads"]
    resources:
        mem_mb=4000,
        runtime=120,
        gpu=TRAIN["resources"]["gpu"],
    log:
        results("logs/token_subspaces_stage{stage}.log"),
    benchmark:
        results("benchmarks/token_subspaces_stage{stage}.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/token_subspaces.py"


rule criterion:
    input:
        shards=SEARCH_SHARDS,
        prompts=results("strings/prompts_{mode}.parquet"),
        tuned=results("approx/{mode}/tuned.json"),
        model_config=results(f"models/seed{ORIGINAL}/config.json"),
        tokenizer=results(f"models/seed{ORIGINAL}/tokenizer.json"),
        prompt_blocks=[results(f"activations/seed{ORIGINAL}/prompts_{{mode}}/block{b}.parquet") for b in range(N_LAYER)],
        subspaces=expand(results("supporting/subspaces/stage{stage}.safetensors"), stage=SUBSPACE_STAGES),
    output:
        table=results("supporting/criterion_{mode}.parquet"),
        summary=results("supporting/criterion_{mode}.json"),
    params:
        **SUPPORTING["criterion"],
        mode=lambda wc: wc.mode,
        grid=config["threshold_grid"],
    resources:
        mem_mb=4000,
        runtime=20,
    log:
        results("logs/criterion_{mode}.log"),
    benchmark:
        results("benchmarks/criterion_{mode}.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/criterion.py"


rule supporting_metrics:
    input:
        ablation=expand(results("supporting/ablation/seed{seed}.parquet"), seed=SEEDS),
        scaling=rules.final_layernorm.output.scaling,
        noise=rules.final_layernorm.output.noise,
        endpoint=rules.ffwd_endpoint.output.table,
        subspaces=expand(results("supporting/subspaces/stage{stage}.parquet"), stage=SUBSPACE_STAGES),
        criterion=expand(results("supporting/criterion_{mode}.json"), mode=MODES),
    output:
        metrics=results("metrics/supporting.json"),
    params:
        seeds=SEEDS,
        modes=MODES,
        n_blocks=N_LAYER,
        stages=SUBSPACE_STAGES,
        target_nll=SUPPORTING["subspace_target_nll"],
        samples=SUPPORTING_SIZES["subspace_samples"],
    log:
        results("logs/supporting_metrics.log"),
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/supporting_metrics.py"


rule plot_ablation:
    input:
        metrics=rules.supporting_metrics.output.metrics,
    output:
        figure=report(
            results("figures/ablation.png"),
            caption="../report/ablation.rst",
            category="Supporting analyses",
        ),
    log:
        results("logs/plot_ablation.log"),
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/plot_ablation.py"


rule plot_final_layernorm:
    input:
        scaling=rules.final_layernorm.output.scaling,
        noise=rules.final_layernorm.output.noise,
    output:
        figure=report(
            results("figures/final_layernorm.png"),
            caption="../report/final_layernorm.rst",
            category="Supporting analyses",
        ),
    log:
        results("logs/plot_final_layernorm.log"),
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/plot_final_layernorm.py"


rule plot_ffwd_endpoint:
    input:
        table=rules.ffwd_endpoint.output.table,
    output:
        figure=report(
            results("figures/ffwd_endpoint.png"),
            caption="../report/ffwd_endpoint.rst",
            category="Supporting analyses",
        ),
    log:
        results("logs/plot_ffwd_endpoint.log"),
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/plot_ffwd_endpoint.py"


rule plot_vector_sums:
    input:
        paths=rules.vector_sums.output.paths,
    output:
        figure=report(
            results("figures/vector_sums.png"),
            caption="../report/vector_sums.rst",
            category="Supporting analyses",
        ),
    log:
        results("logs/plot_vector_sums.log"),
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/plot_vector_sums.py"


rule plot_token_subspaces:
    input:
        tokens=expand(results("supporting/subspaces/stage{stage}.parquet"), stage=SUBSPACE_STAGES),
        mixtures=expand(results("supporting/subspaces/stage{stage}_mixtures.parquet"), stage=SUBSPACE_STAGES),
        tokenizer=results(f"models/seed{ORIGINAL}/tokenizer.json"),
    params:
        n_layer=N_LAYER,
    output:
        figure=report(
            results("figures/token_subspaces.png"),
            caption="../report/token_subspaces.rst",
            category="Supporting analyses",
        ),
    log:
        results("logs/plot_token_subspaces.log"),
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/plot_token_subspaces.py"


rule plot_criterion:
    input:
        metrics=rules.supporting_metrics.output.metrics,
    output:
        figure=report(
            results("figures/criterion.png"),
            caption="../report/criterion.rst",
            category="Supporting analyses",
        ),
    log:
        results("logs/plot_criterion.log"),
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/plot_criterion.py"


SUPPORTING_OUTPUTS = [
    results("metrics/supporting.json"),
    *(
        results(f"figures/{name}.png")
        for name in ("ablation", "final_layernorm", "ffwd_endpoint", "vector_sums", "token_subspaces", "criterion")
    ),
]


rule supporting:
    """This family alone, on top of the core: `snakemake --cores all supporting`."""
    input:
        SUPPORTING_OUTPUTS,
