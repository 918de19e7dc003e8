# The paper's supporting analyses (method.md §7): ablation, final LayerNorm, the feed-forward-only
# endpoint and vector sums, token subspaces, and the criterion. Target: `snakemake --cores all supporting`.
# Reads the core's outputs (models, prompts, prompt activations, search summaries, tuned thresholds).
from tinylens.supporting.subspaces import check_stages

SUPPORTING = config["supporting"]
SUPPORTING_SIZES = SETTINGS["supporting"]
SUBSPACE_STAGES = check_stages(SUPPORTING["subspace_stages"], N_LAYER, "supporting.subspace_stages")


def supporting_path(path):
    return results(f"supporting/{path}")


def model_files(seed):
    base = results(f"models/seed{seed}")
    return {"weights": f"{base}/model.safetensors", "config": f"{base}/config.json",
            "tokenizer": f"{base}/tokenizer.json"}


PROMPT_TABLES = expand(results("strings/prompts_{mode}.parquet"), mode=MODES)


wildcard_constraints:
    stage=r"\d+",


rule ablation:
    input:
        **model_files("{seed}"),
        prompts=PROMPT_TABLES,
    output:
        table=supporting_path("ablation/seed{seed}.parquet"),
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
    script:
        "../scripts/ablation.py"


rule final_layernorm:
    input:
        **model_files(ORIGINAL),
        prompts=PROMPT_TABLES,
    output:
        scaling=supporting_path("final_layernorm_scaling.parquet"),
        noise=supporting_path("final_layernorm_noise.parquet"),
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
    script:
        "../scripts/final_layernorm.py"


rule ffwd_endpoint:
    input:
        **model_files(ORIGINAL),
        prompts=PROMPT_TABLES,
    output:
        table=supporting_path("ffwd_endpoint.parquet"),
    params:
        modes=MODES,
    resources:
        mem_mb=2000,
        runtime=10,
    log:
        results("logs/ffwd_endpoint.log"),
    script:
        "../scripts/ffwd_endpoint.py"


rule vector_sums:
    input:
        **model_files(ORIGINAL),
    output:
        paths=supporting_path("vector_sums.json"),
    params:
        prompts=config["case_study_prompts"],
        length=config["substring_length"],
    resources:
        mem_mb=1000,
        runtime=5,
    log:
        results("logs/vector_sums.log"),
    script:
        "../scripts/vector_sums.py"


rule token_subspaces:
    input:
        **model_files(ORIGINAL),
    output:
        vectors=supporting_path("subspaces/stage{stage}.safetensors"),
        tokens=supporting_path("subspaces/stage{stage}.parquet"),
        mixtures=supporting_path("subspaces/stage{stage}_mixtures.parquet"),
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
        subspaces=expand(supporting_path("subspaces/stage{stage}.safetensors"), stage=SUBSPACE_STAGES),
    output:
        table=supporting_path("criterion_{mode}.parquet"),
        summary=supporting_path("criterion_{mode}.json"),
    params:
        mode=lambda wc: wc.mode,
        grid=config["threshold_grid"],
        **SUPPORTING["criterion"],
    resources:
        mem_mb=4000,
        runtime=20,
    log:
        results("logs/criterion_{mode}.log"),
    benchmark:
        results("benchmarks/criterion_{mode}.tsv")
    script:
        "../scripts/criterion.py"


rule supporting_metrics:
    input:
        ablation=expand(supporting_path("ablation/seed{seed}.parquet"), seed=SEEDS),
        scaling=rules.final_layernorm.output.scaling,
        noise=rules.final_layernorm.output.noise,
        endpoint=rules.ffwd_endpoint.output.table,
        subspaces=expand(supporting_path("subspaces/stage{stage}.parquet"), stage=SUBSPACE_STAGES),
        criterion=expand(supporting_path("criterion_{mode}.json"), mode=MODES),
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
    script:
        "../scripts/supporting_metrics.py"


def supporting_figure(name):
    return report(results(f"figures/{name}.png"), caption=f"../report/{name}.rst", category="Supporting analyses")


rule plot_ablation:
    input:
        metrics=rules.supporting_metrics.output.metrics,
    output:
        figure=supporting_figure("ablation"),
    log:
        results("logs/plot_ablation.log"),
    script:
        "../scripts/plot_ablation.py"


rule plot_final_layernorm:
    input:
        scaling=rules.final_layernorm.output.scaling,
        noise=rules.final_layernorm.output.noise,
    output:
        figure=supporting_figure("final_layernorm"),
    log:
        results("logs/plot_final_layernorm.log"),
    script:
        "../scripts/plot_final_layernorm.py"


rule plot_ffwd_endpoint:
    input:
        table=rules.ffwd_endpoint.output.table,
    output:
        figure=supporting_figure("ffwd_endpoint"),
    log:
        results("logs/plot_ffwd_endpoint.log"),
    script:
        "../scripts/plot_ffwd_endpoint.py"


rule plot_vector_sums:
    input:
        paths=rules.vector_sums.output.paths,
    output:
        figure=supporting_figure("vector_sums"),
    log:
        results("logs/plot_vector_sums.log"),
    script:
        "../scripts/plot_vector_sums.py"


rule plot_token_subspaces:
    input:
        tokens=expand(supporting_path("subspaces/stage{stage}.parquet"), stage=SUBSPACE_STAGES),
        mixtures=expand(supporting_path("subspaces/stage{stage}_mixtures.parquet"), stage=SUBSPACE_STAGES),
        tokenizer=results(f"models/seed{ORIGINAL}/tokenizer.json"),
    params:
        n_layer=N_LAYER,
    output:
        figure=supporting_figure("token_subspaces"),
    log:
        results("logs/plot_token_subspaces.log"),
    script:
        "../scripts/plot_token_subspaces.py"


rule plot_criterion:
    input:
        metrics=rules.supporting_metrics.output.metrics,
    output:
        figure=supporting_figure("criterion"),
    log:
        results("logs/plot_criterion.log"),
    script:
        "../scripts/plot_criterion.py"


SUPPORTING_OUTPUTS = [
    results("metrics/supporting.json"),
    *(results(f"figures/{name}.png") for name in
      ("ablation", "final_layernorm", "ffwd_endpoint", "vector_sums", "token_subspaces", "criterion")),
]


rule supporting:
    """This family alone, on top of the core: `snakemake --cores all supporting`."""
    input:
        SUPPORTING_OUTPUTS,
