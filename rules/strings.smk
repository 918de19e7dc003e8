from tinylens.resources import per_input_byte


rule build_strings:
    input:
        tokenizer=rules.tokenize.output.tokenizer,
        train=rules.tokenize.output.train,
        val=rules.tokenize.output.val,
    output:
        strings=results("strings/strings.parquet"),
        prompts_corpus=results("strings/prompts_corpus.parquet"),
        prompts_heldout=results("strings/prompts_heldout.parquet"),
    params:
        length=config["substring_length"],
        n_prompts=ANALYSIS["n_prompts"],
        tune_fraction=ANALYSIS["tune_fraction"],
        seed=config["prompt_seed"],
    resources:
        # index arrays and counts over every window of the text: about 1,000 bytes per token (1,434 MB
        # measured for TinyShakespeare's 1.1 M tokens)
        mem_mb=per_input_byte(["train", "val"], 400, 1200),
        runtime=10,
    log:
        results("logs/build_strings.log"),
    benchmark:
        results("benchmarks/build_strings.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/core/build_strings.py"


rule paper_prompts:
    input:
        tokenizer=rules.tokenize.output.tokenizer,
        train=rules.tokenize.output.train,
        val=rules.tokenize.output.val,
    output:
        prompts=results("strings/prompts_paper.parquet"),
    params:
        length=config["substring_length"],
        n_prompts=ANALYSIS["paper_prompts"],
        seed=config["paper_prompt_seed"],
    resources:
        # the window keys and np.unique's copies: about 60 bytes per token
        mem_mb=per_input_byte(["train", "val"], 400, 60),
        runtime=5,
    log:
        results("logs/paper_prompts.log"),
    benchmark:
        results("benchmarks/paper_prompts.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/core/paper_prompts.py"
