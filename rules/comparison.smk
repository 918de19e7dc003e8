# The published numbers of method.md beside ours, in one table (tinylens.comparison; method.md §12).
# Its sources (COMPARISON_SOURCES) are in common.smk.
from tinylens.comparison import HEADLINE, differences as paper_differences
from tinylens.config import resolve_preset


rule paper_comparison:
    input:
        unpack(comparison_sources),
    output:
        metrics=metrics_file("comparison"),
        table=report(
            results("comparison/paper_comparison.csv"),
            caption="../report/comparison/paper_comparison.rst",
            category="Comparison with the paper",
        ),
        markdown=results("comparison/paper_comparison.md"),
    params:
        preset=PRESET,
        files={name: path for name, (path, _) in COMPARISON_SOURCES.items()},
        absent=absent_sources,
        # what of this preset differs from the paper preset's (rows that depend on it are "not comparable")
        differences=paper_differences(SETTINGS, resolve_preset(config, "paper")),
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
        "../scripts/comparison/paper_comparison.py"


# The run's headline, what `dvc metrics show` prints (tinylens.comparison.run_headline): outside results/<preset>/,
# one file per preset in one folder, which dvc.yaml's top-level `metrics:` names; `tinylens publish` commits it to git.
rule write_headline:
    input:
        core=rules.hellinger_summary.output.headline,
        comparison=rules.paper_comparison.output.metrics,
    output:
        HEADLINE.format(preset=PRESET),
    resources:
        mem_mb=300,
        runtime=5,
    log:
        results("logs/write_headline.log"),
    benchmark:
        results("benchmarks/write_headline.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/comparison/write_headline.py"


rule comparison:
    input:
        rules.paper_comparison.output,
        rules.write_headline.output,
