from tinylens.resources import dump_memory


rule dump_activations:
    input:
        **model_files("{seed}"),
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
        mem_mb=dump_memory(dump_kinds, N_LAYER, D_MODEL, config["substring_length"], ANALYSIS["dump_batch_size"]),
        runtime=per_row("table", 5, row_seconds=1.5e-3 * width_factor(D_MODEL)),
        gpu=TRAIN["resources"]["gpu"],  # the preset's: a GPU where training has one
    log:
        results("logs/dump_activations_seed{seed}_{set}.log"),
    benchmark:
        results("benchmarks/dump_activations_seed{seed}_{set}.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/core/dump_activations.py"
