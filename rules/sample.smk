rule sample:
    input:
        **model_files("{seed}"),
    output:
        sample=results("samples/seed{seed}.txt"),
    params:
        **config["sample"],
    resources:
        mem_mb=500,
        runtime=5,
    log:
        results("logs/sample_seed{seed}.log"),
    benchmark:
        results("benchmarks/sample_seed{seed}.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/core/sample.py"
