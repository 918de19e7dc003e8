rule sample:
    input:
        weights=rules.train_model.output.weights,
        config=rules.train_model.output.config,
        tokenizer=rules.train_model.output.tokenizer,
    output:
        sample=results("samples/seed{seed}.txt"),
    params:
        **config["sample"],
    log:
        results("logs/sample_seed{seed}.log"),
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/sample.py"
