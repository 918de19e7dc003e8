rule train_model:
    input:
        train=rules.tokenize.output.train,
        val=rules.tokenize.output.val,
        tokenizer=rules.tokenize.output.tokenizer,
    output:
        **model_files("{seed}", "weights", "config", "tokenizer", "metrics", "loss"),
        checkpoints=directory(model_files("{seed}", "checkpoints")["checkpoints"]),
    params:
        seed=lambda wc: int(wc.seed),
        # the shape as config.json names it (n_embed for d_model): the params recorded with the models trained
        # before the rename still match, so those are not retrained
        model=file_form(SETTINGS["model"]),
        # this seed's settings (its own last step where final_step_by_seed names it)
        train=lambda wc: seed_train_settings(TRAIN, int(wc.seed)),
        device=config["device"],
        compile=TRAIN.get("compile", "none"),
        # Unfinished work (resume state, checkpoints so far) lives here, outside the
        # outputs, so Snakemake never deletes it and a rerun resumes from it.
        work_dir=lambda wc: results(f"models/seed{wc.seed}.partial"),
    threads: TRAIN["threads"]
    resources:
        mem_mb=TRAIN["resources"]["mem_mb"],
        runtime=TRAIN["resources"]["runtime"],
        gpu=TRAIN["resources"]["gpu"],
    log:
        results("logs/train_seed{seed}.log"),
    benchmark:
        results("benchmarks/train_seed{seed}.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/core/train_model.py"


rule train_variant:
    """A variant model (method.md §14): the original seed's data, initialisation seed and training, with one option
    of the model changed (tinylens.model_config.VARIANT_OPTIONS)."""
    input:
        train=rules.tokenize.output.train,
        val=rules.tokenize.output.val,
        tokenizer=rules.tokenize.output.tokenizer,
    output:
        **variant_files("{variant}", "weights", "config", "tokenizer", "metrics", "loss"),
        checkpoints=directory(variant_files("{variant}", "checkpoints")["checkpoints"]),
    params:
        seed=ORIGINAL,
        model=lambda wc: {**file_form(SETTINGS["model"]), **VARIANT_OPTIONS[wc.variant]},
        train=variant_train_settings(TRAIN, SETTINGS["variants"], ORIGINAL),
        device=config["device"],
        compile=TRAIN.get("compile", "none"),
        work_dir=lambda wc: results(f"models/{wc.variant}.partial"),
    threads: TRAIN["threads"]
    resources:
        mem_mb=TRAIN["resources"]["mem_mb"],
        runtime=TRAIN["resources"]["runtime"],
        gpu=TRAIN["resources"]["gpu"],
    log:
        results("logs/train_variant_{variant}.log"),
    benchmark:
        results("benchmarks/train_variant_{variant}.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/core/train_variant.py"


rule training_summary:
    input:
        metrics=[model_files(seed, "metrics")["metrics"] for seed in SEEDS],
    output:
        summary=metrics_file("core", "training"),
    params:
        original=ORIGINAL,
    resources:
        mem_mb=400,
        runtime=5,
    log:
        results("logs/training_summary.log"),
    benchmark:
        results("benchmarks/training_summary.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/core/training_summary.py"
