rule download_corpus:
    output:
        corpus=results("data/corpus.txt"),
    params:
        # The checksum, not the URL, decides the content: pointing corpus_url at
        # an offline copy of the same file must not trigger a rerun.
        sha256=config["corpus_sha256"],
    # Every corpus-reading job waits on this one: run it before the jobs that do not (the toy models), so a
    # bad corpus stops the run before other work is spent and the training starts as early as it can.
    priority: 100
    resources:
        mem_mb=200,
        runtime=10,
    log:
        results("logs/download_corpus.log"),
    benchmark:
        results("benchmarks/download_corpus.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/core/download_corpus.py"


rule tokenize:
    input:
        corpus=rules.download_corpus.output.corpus,
    output:
        tokenizer=results("data/tokenizer.json"),
        train=results("data/train.npy"),
        val=results("data/val.npy"),
        stats=results("metrics/corpus.json"),
    params:
        corpus_chars=SETTINGS["corpus_chars"],
        train_fraction=SETTINGS["train_fraction"],
    priority: 100
    resources:
        mem_mb=400,
        runtime=5,
    log:
        results("logs/tokenize.log"),
    benchmark:
        results("benchmarks/tokenize.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/core/tokenize.py"
