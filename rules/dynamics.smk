# Training dynamics over checkpoints (method.md §8): every checkpoint of every seed measured on the
# same probes, then the phases found by code, then one figure per script. Target: `dynamics`.
DYNAMICS = SETTINGS["dynamics"]
DYNAMICS_TABLES = {
    "checkpoints": expand(results("dynamics/seed{seed}/checkpoints.parquet"), seed=SEEDS),
    "heads": expand(results("dynamics/seed{seed}/heads.parquet"), seed=SEEDS),
}


rule dynamics_measure:
    input:
        checkpoints=results("models/seed{seed}/checkpoints"),
        config=results("models/seed{seed}/config.json"),
        tokenizer=rules.tokenize.output.tokenizer,
        train=rules.tokenize.output.train,
        val=rules.tokenize.output.val,
    output:
        checkpoints=results("dynamics/seed{seed}/checkpoints.parquet"),
        heads=results("dynamics/seed{seed}/heads.parquet"),
    params:
        measure=DYNAMICS["measure"],
        batch_size=TRAIN["batch_size"],
        device=config["device"],
    threads: DYNAMICS["threads"]
    resources:
        mem_mb=DYNAMICS["resources"]["mem_mb"],
        runtime=DYNAMICS["resources"]["runtime"],
        gpu=DYNAMICS["resources"]["gpu"],
    log:
        results("logs/dynamics_measure_seed{seed}.log"),
    benchmark:
        results("benchmarks/dynamics_measure_seed{seed}.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/measure_dynamics.py"


rule dynamics_summary:
    input:
        **DYNAMICS_TABLES,
        model_config=results(f"models/seed{ORIGINAL}/config.json"),
    output:
        summary=results("metrics/dynamics.json"),
    params:
        seeds=SEEDS,
        original=ORIGINAL,
        phases=DYNAMICS["phases"],
        # the prefix-matching sequences' shape: the uniform head's baseline
        repeat_length=DYNAMICS["measure"]["repeat"]["length"],
        repeat_copies=DYNAMICS["measure"]["repeat"]["copies"],
        batch_size=TRAIN["batch_size"],
    resources:
        mem_mb=1000,
        runtime=5,
    log:
        results("logs/dynamics_summary.log"),
    benchmark:
        results("benchmarks/dynamics_summary.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/dynamics_summary.py"


rule plot_dynamics_energy_kl:
    input:
        **DYNAMICS_TABLES,
        summary=rules.dynamics_summary.output.summary,
        model_config=results(f"models/seed{ORIGINAL}/config.json"),
    output:
        figure=report(
            results("figures/dynamics_energy_kl.png"),
            caption="../report/dynamics_energy_kl.rst",
            category="Training dynamics",
        ),
    params:
        seeds=SEEDS,
    resources:
        mem_mb=1000,
        runtime=5,
    log:
        results("logs/plot_dynamics_energy_kl.log"),
    benchmark:
        results("benchmarks/plot_dynamics_energy_kl.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/plot_dynamics_energy_kl.py"


rule plot_dynamics_icl_score:
    input:
        **DYNAMICS_TABLES,
        summary=rules.dynamics_summary.output.summary,
        model_config=results(f"models/seed{ORIGINAL}/config.json"),
    output:
        figure=report(
            results("figures/dynamics_icl_score.png"),
            caption="../report/dynamics_icl_score.rst",
            category="Training dynamics",
        ),
    params:
        seeds=SEEDS,
        original=ORIGINAL,
        icl_positions=DYNAMICS["measure"]["icl_positions"],
    resources:
        mem_mb=1000,
        runtime=5,
    log:
        results("logs/plot_dynamics_icl_score.log"),
    benchmark:
        results("benchmarks/plot_dynamics_icl_score.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/plot_dynamics_icl_score.py"


rule plot_dynamics_loss_by_position:
    input:
        checkpoints=results(f"dynamics/seed{ORIGINAL}/checkpoints.parquet"),
        heads=results(f"dynamics/seed{ORIGINAL}/heads.parquet"),
        summary=rules.dynamics_summary.output.summary,
        model_config=results(f"models/seed{ORIGINAL}/config.json"),
    output:
        figure=report(
            results("figures/dynamics_loss_by_position.png"),
            caption="../report/dynamics_loss_by_position.rst",
            category="Training dynamics",
        ),
    params:
        original=ORIGINAL,
        smooth_decades=DYNAMICS["phases"]["smooth_decades"],
    resources:
        mem_mb=1000,
        runtime=5,
    log:
        results("logs/plot_dynamics_loss_by_position.log"),
    benchmark:
        results("benchmarks/plot_dynamics_loss_by_position.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/plot_dynamics_loss_by_position.py"


rule plot_dynamics_head_scores:
    input:
        checkpoints=results(f"dynamics/seed{ORIGINAL}/checkpoints.parquet"),
        heads=results(f"dynamics/seed{ORIGINAL}/heads.parquet"),
        summary=rules.dynamics_summary.output.summary,
        model_config=results(f"models/seed{ORIGINAL}/config.json"),
    output:
        figure=report(
            results("figures/dynamics_head_scores.png"),
            caption="../report/dynamics_head_scores.rst",
            category="Training dynamics",
        ),
    params:
        original=ORIGINAL,
    resources:
        mem_mb=1000,
        runtime=5,
    log:
        results("logs/plot_dynamics_head_scores.log"),
    benchmark:
        results("benchmarks/plot_dynamics_head_scores.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/plot_dynamics_head_scores.py"


rule plot_dynamics_energy_depth:
    input:
        **DYNAMICS_TABLES,
        summary=rules.dynamics_summary.output.summary,
        model_config=results(f"models/seed{ORIGINAL}/config.json"),
    output:
        figure=report(
            results("figures/dynamics_energy_depth.png"),
            caption="../report/dynamics_energy_depth.rst",
            category="Training dynamics",
        ),
    params:
        seeds=SEEDS,
        original=ORIGINAL,
    resources:
        mem_mb=1000,
        runtime=5,
    log:
        results("logs/plot_dynamics_energy_depth.log"),
    benchmark:
        results("benchmarks/plot_dynamics_energy_depth.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/plot_dynamics_energy_depth.py"


DYNAMICS_TARGETS = [
    rules.dynamics_summary.output.summary,
    rules.plot_dynamics_energy_kl.output.figure,
    rules.plot_dynamics_icl_score.output.figure,
    rules.plot_dynamics_loss_by_position.output.figure,
    rules.plot_dynamics_head_scores.output.figure,
    rules.plot_dynamics_energy_depth.output.figure,
    # intermediates too: `rule all` then notices one deleted or lost with a failed job
    expand(rules.dynamics_measure.output, seed=SEEDS),
]


rule dynamics:
    input:
        DYNAMICS_TARGETS,
