def dump_kinds(wildcards):
    """Prompts keep every kind (the ablation analysis needs them); strings what the preset names."""
    return ANALYSIS["string_kinds"] if wildcards.set == "strings" else ["block_input", "sa_out", "ffwd_out"]


def dump_mem_mb(wildcards, input):
    """The table and its token ids (per row), plus one batch's activations of every kept kind and block
    (gathered before they are written) and the forward pass's own tensors (about ten more of that size):
    at paper width the batch term dominates (1.5-2.1 GB measured for 20,000 prompts, docs/benchmarks.md)."""
    one_tensor = ANALYSIS["dump_batch_size"] * config["substring_length"] * D_MODEL * 4
    batch_bytes = one_tensor * (len(dump_kinds(wildcards)) * N_LAYER + 10)
    return int(850 + (table_rows(input.table) * (1900 + 4 * D_MODEL) + batch_bytes) / 2**20)


rule dump_activations:
    input:
        weights=results("models/seed{seed}/model.safetensors"),
        config=results("models/seed{seed}/config.json"),
        tokenizer=results("models/seed{seed}/tokenizer.json"),
        table=dump_input_table,
    output:
        blocks=[results(f"activations/seed{{seed}}/{{set}}/block{b}.parquet") for b in range(N_LAYER)],
        logits=results("activations/seed{seed}/{set}/logits.parquet"),
    params:
        set=lambda wc: wc.set,
        kinds=dump_kinds,
        batch_size=ANALYSIS["dump_batch_size"],
        device=config["device"],
    threads: ANALYSIS["dump_threads"]
    resources:
        mem_mb=dump_mem_mb,
        runtime=per_row("table", 5, row_seconds=1.5e-3 * max(1, D_MODEL / 64)),
        gpu=TRAIN["resources"]["gpu"],  # the preset's: a GPU where training has one
    log:
        results("logs/dump_activations_seed{seed}_{set}.log"),
    benchmark:
        results("benchmarks/dump_activations_seed{seed}_{set}.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/dump_activations.py"
