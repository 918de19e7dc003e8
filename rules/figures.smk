# The figures: the core's table here, each family's in its rules file (figures() in common.smk), and one
# rule per row of every table at the end. Included after every family, so that every table is complete.
CORE_FIGURES = figures(
    "Training",
    family="core",
    loss_curves=dict(
        input={
            "losses": [model_files(seed, "loss")["loss"] for seed in SEEDS],
            "corpus_stats": rules.tokenize.output.stats,
        },
        params={"seeds": SEEDS, "original": ORIGINAL},
    ),
) + figures(
    "Approximation",
    family="core",
    hellinger_histogram=dict(
        input={"tables": expand(results("evaluation/{mode}/hellinger.parquet"), mode=MODES)},
        params={"modes": MODES, "alternates": ALTERNATES, "n_blocks": N_LAYER},
    ),
    threshold_sweep=dict(
        input={
            "sweeps": expand(results("approx/{mode}/threshold_sweep.csv"), mode=TUNED_MODES),
            "tuned": expand(results("approx/{mode}/tuned.json"), mode=TUNED_MODES),
        },
        params={"modes": TUNED_MODES, "paper_thresholds": config["paper_baseline"]["thresholds"], "n_blocks": N_LAYER},
    ),
    case_studies=dict(input={"summary": rules.case_studies.output.summary}),
)


# The figure's name is a wildcard constrained to that one name, and its family a param: the script path is
# filled in from them when the job runs (a loop variable would by then hold the last figure's values).
for rule_name, row in FIGURES.items():

    rule:
        name:
            rule_name
        wildcard_constraints:
            figure=row["figure"],
        input:
            **row["input"],
        output:
            figure=report(
                row["under"]("figures/{figure}.png"),
                caption=f"../report/{row['family']}/{row['figure']}.rst",
                category=row["category"],
            ),
        params:
            **row["params"],
            # the folder of the figure's script (read by this rule's script: path, not by the script)
            family=row["family"],
        resources:
            mem_mb=row["mem_mb"],
            runtime=5,
        log:
            row["under"]("logs/plot_{figure}.log"),
        benchmark:
            row["under"]("benchmarks/plot_{figure}.tsv")
        conda:
            "../envs/tinylens.yaml"
        script:
            "../scripts/{params.family}/plot_{wildcards.figure}.py"
