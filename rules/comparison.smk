# The published numbers of method.md beside ours, in one table (tinylens.comparison; method.md §12).

# The metrics documents the table reads: name -> (file under results/<preset>/, the rule that writes it).
# A document whose rule is not part of the workflow is listed as "not computed" in its rows.
COMPARISON_SOURCES = {
    "training": ("metrics/training.json", "training_summary"),
    "original_model": (f"models/seed{ORIGINAL}/metrics.json", "train_model"),
    "verification": ("metrics/search_verification.json", "verify_search"),
    "paper_prompts": ("metrics/hellinger_paper.json", "evaluate"),
    "corpus": ("metrics/hellinger_corpus.json", "evaluate"),
    "heldout": ("metrics/hellinger_heldout.json", "evaluate"),
    "case_studies": ("case_studies/summary.json", "case_studies"),
    "supporting": ("metrics/supporting.json", "supporting_metrics"),  # §7: the supporting analyses
}


def has_rule(name):
    """Whether the workflow defines rule ``name`` (asked once every rule file is read)."""
    return any(r.name == name for r in workflow.rules)


def comparison_sources(wildcards):
    return {name: results(path) for name, (path, rule) in COMPARISON_SOURCES.items() if has_rule(rule)}


def absent_sources(wildcards):
    return {
        name: f"{path} is not made by this workflow (no rule {rule})"
        for name, (path, rule) in COMPARISON_SOURCES.items()
        if not has_rule(rule)
    }


rule paper_comparison:
    input:
        unpack(comparison_sources),
    output:
        metrics=results("metrics/paper_comparison.json"),
        table=report(
            results("comparison/paper_comparison.csv"),
            caption="../report/paper_comparison.rst",
            category="Comparison with the paper",
        ),
        markdown=results("comparison/paper_comparison.md"),
    params:
        preset=PRESET,
        files={name: path for name, (path, _) in COMPARISON_SOURCES.items()},
        absent=absent_sources,
    resources:
        mem_mb=400,
        runtime=5,
    log:
        results("logs/paper_comparison.log"),
    benchmark:
        results("benchmarks/paper_comparison.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/paper_comparison.py"


rule comparison:
    input:
        rules.paper_comparison.output,
