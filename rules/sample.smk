rule sample:
    input:
        weights=rules.train_model.output.weights,
        config=rules.train_model.output.config,
        tokenizer=rules.train_model.output.tokenizer,
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
    script:
        "../scripts/sample.py"
