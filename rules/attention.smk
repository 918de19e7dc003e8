# Attention as a dynamical system (method.md §10): attention spectra, depth-wise trajectories
# through the logit and tuned lenses, speaker probes. Heavy rules are one job per seed
# ({seed} wildcard); the target runs the original seed only, as the analysis asks.
from tinylens.resources import attention_memory

ATTENTION = SETTINGS["attention"]


ATTENTION_DIR = results("attention/seed{seed}")  # one folder per seed; the target asks for the original
ATTENTION_ORIGINAL = results(f"attention/seed{ORIGINAL}")


# memory of each job: grows with the preset's model width, context, windows and vocabulary
ATTENTION_MEM = attention_memory(SETTINGS["model"], ATTENTION)


rule attention_spectra:
    input:
        **model_files("{seed}", "weights", "config"),
        val=rules.tokenize.output.val,
    output:
        diagonal=f"{ATTENTION_DIR}/diagonal.parquet",
        absorption=f"{ATTENTION_DIR}/absorption.parquet",
        heads=f"{ATTENTION_DIR}/heads.parquet",
    params:
        sequences=ATTENTION["sequences"],
        eigen_sample=ATTENTION["eigen_sample"],
        walk_doublings=ATTENTION["walk_doublings"],
        device=config["device"],
    threads: 1
    resources:
        mem_mb=ATTENTION_MEM["spectra"],
        runtime=20,
        gpu=TRAIN["resources"]["gpu"],
    log:
        results("logs/attention_spectra_seed{seed}.log"),
    benchmark:
        results("benchmarks/attention_spectra_seed{seed}.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/attention/attention_spectra.py"


rule attention_hull:
    """Source 001's convex-hull reading per head (method.md §10): one forward pass over the spectra's windows."""
    input:
        **model_files("{seed}", "weights", "config"),
        val=rules.tokenize.output.val,
    output:
        table=f"{ATTENTION_DIR}/hull.parquet",
    params:
        sequences=ATTENTION["sequences"],
        seed=ATTENTION["seed"],
        device=config["device"],
    threads: 1
    resources:
        mem_mb=ATTENTION_MEM["spectra"],
        runtime=10,
        gpu=TRAIN["resources"]["gpu"],
    log:
        results("logs/attention_hull_seed{seed}.log"),
    benchmark:
        results("benchmarks/attention_hull_seed{seed}.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/attention/attention_hull.py"


rule train_tuned_lens:
    input:
        **model_files("{seed}", "weights", "config"),
        train=rules.tokenize.output.train,
    output:
        lens=f"{ATTENTION_DIR}/tuned_lens.safetensors",
        history=f"{ATTENTION_DIR}/tuned_lens_training.csv",
    params:
        sequences=ATTENTION["lens_sequences"],
        settings=ATTENTION["tuned_lens"],
        seed=ATTENTION["seed"],
        device=config["device"],
    threads: 1
    resources:
        mem_mb=ATTENTION_MEM["tuned_lens"],
        runtime=20,
        gpu=TRAIN["resources"]["gpu"],
    log:
        results("logs/train_tuned_lens_seed{seed}.log"),
    benchmark:
        results("benchmarks/train_tuned_lens_seed{seed}.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/attention/train_tuned_lens.py"


rule measure_trajectories:
    input:
        **model_files("{seed}", "weights", "config"),
        val=rules.tokenize.output.val,
        lens=rules.train_tuned_lens.output.lens,
        history=rules.train_tuned_lens.output.history,
    output:
        table=f"{ATTENTION_DIR}/trajectories.parquet",
        summary=f"{ATTENTION_DIR}/trajectories.json",
    params:
        sequences=ATTENTION["sequences"],
        device=config["device"],
    threads: 1
    resources:
        mem_mb=ATTENTION_MEM["trajectories"],
        runtime=20,
        gpu=TRAIN["resources"]["gpu"],
    log:
        results("logs/measure_trajectories_seed{seed}.log"),
    benchmark:
        results("benchmarks/measure_trajectories_seed{seed}.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/attention/measure_trajectories.py"


rule probe_speakers:
    input:
        **model_files("{seed}", "weights", "config"),
        tokenizer=rules.tokenize.output.tokenizer,
        train=rules.tokenize.output.train,
        val=rules.tokenize.output.val,
    output:
        table=f"{ATTENTION_DIR}/probes.parquet",
        passages=f"{ATTENTION_DIR}/passages.parquet",
        summary=f"{ATTENTION_DIR}/probes.json",
    params:
        probe=ATTENTION["probe"],
        seed=ATTENTION["seed"],
        device=config["device"],
    threads: 1
    resources:
        mem_mb=ATTENTION_MEM["probes"],
        runtime=20,
        gpu=TRAIN["resources"]["gpu"],
    log:
        results("logs/probe_speakers_seed{seed}.log"),
    benchmark:
        results("benchmarks/probe_speakers_seed{seed}.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/attention/probe_speakers.py"


rule next_token_alignment:
    """Source 001's premise (method.md §14): the final state against the next token's embedding row, in the original
    (untied) model and in the tied variant, on the same validation windows."""
    input:
        **model_files(ORIGINAL, "weights", "config", "metrics"),
        tied=variant_files("tied", "weights")["weights"],
        tied_config=variant_files("tied", "config")["config"],
        tied_metrics=variant_files("tied", "metrics")["metrics"],
        val=rules.tokenize.output.val,
    output:
        summary=results("attention/next_token_alignment.json"),
    params:
        sequences=ATTENTION["sequences"],
        device=config["device"],
    threads: 1
    resources:
        mem_mb=ATTENTION_MEM["trajectories"],
        runtime=10,
        gpu=TRAIN["resources"]["gpu"],
    log:
        results("logs/next_token_alignment.log"),
    benchmark:
        results("benchmarks/next_token_alignment.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/attention/next_token_alignment.py"


rule attention_summary:
    input:
        **({"alignment": results("attention/next_token_alignment.json")} if "tied" in VARIANTS else {}),
        heads=f"{ATTENTION_ORIGINAL}/heads.parquet",
        trajectories=f"{ATTENTION_ORIGINAL}/trajectories.json",
        probes=f"{ATTENTION_ORIGINAL}/probes.json",
        hull=f"{ATTENTION_ORIGINAL}/hull.parquet",
    output:
        summary=metrics_file("attention"),
    params:
        seed=ORIGINAL,
    log:
        results("logs/attention_summary.log"),
    benchmark:
        results("benchmarks/attention_summary.tsv")
    resources:
        mem_mb=400,  # 305 MB measured at the test preset once it also reads the convex-hull table
        runtime=5,
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/attention/attention_summary.py"


ATTENTION_FIGURES = figures(
    "Attention dynamics",
    family="attention",
    mem_mb=400,
    attention_diagonals=dict(input=dict(table=f"{ATTENTION_ORIGINAL}/diagonal.parquet")),
    attention_absorption=dict(input=dict(table=f"{ATTENTION_ORIGINAL}/absorption.parquet")),
    attention_hull=dict(input=dict(table=f"{ATTENTION_ORIGINAL}/hull.parquet")),
    lens_curves=dict(input=dict(summary=f"{ATTENTION_ORIGINAL}/trajectories.json")),
    next_token_cosine=dict(
        input=dict(
            table=f"{ATTENTION_ORIGINAL}/trajectories.parquet", summary=f"{ATTENTION_ORIGINAL}/trajectories.json"
        )
    ),
    probe_accuracy=dict(
        input=dict(table=f"{ATTENTION_ORIGINAL}/probes.parquet", summary=f"{ATTENTION_ORIGINAL}/probes.json")
    ),
)


ATTENTION_TARGETS = [
    *ATTENTION_FIGURES,
    rules.attention_summary.output.summary,
    *([rules.next_token_alignment.output.summary] if "tied" in VARIANTS else []),
    # intermediates too: `rule all` then notices one deleted or lost with a failed job
    *(
        expand(rule.output, seed=ORIGINAL)
        for rule in (
            rules.attention_spectra,
            rules.attention_hull,
            rules.train_tuned_lens,
            rules.measure_trajectories,
            rules.probe_speakers,
        )
    ),
]


rule attention:
    input:
        ATTENTION_TARGETS,
