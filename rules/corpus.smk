rule download_corpus:
    output:
        corpus=results("data/corpus.txt"),
    params:
        # The checksum, not the URL, decides the content: pointing corpus_url at
        # an offline copy of the same file must not trigger a rerun.
        sha256=config["corpus_sha256"],
    log:
        results("logs/download_corpus.log"),
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/download_corpus.py"


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
    log:
        results("logs/tokenize.log"),
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/tokenize.py"
