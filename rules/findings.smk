# The run's findings in words (tinylens.findings): every family's sentences, formatted from this run's
# metrics, in results/<preset>/findings.md, first on the report's front page. After every family: it reads their
# metrics (a family this workflow does not define is skipped in the text, with a note).
from tinylens.findings import FAMILIES


def findings_metrics(wildcards):
    """Every family's metrics files that a rule of this workflow makes."""
    return [results(path) for family in FAMILIES for path, rule in family.metrics.values() if has_rule(rule)]


rule write_findings:
    input:
        findings_metrics,
    output:
        report(
            results("findings.md"),
            caption="../report/findings.rst",
            category="Findings",
        ),
    params:
        root=results(""),
        preset=PRESET,
    resources:
        mem_mb=600,
        runtime=5,
    log:
        results("logs/findings.log"),
    benchmark:
        results("benchmarks/findings.tsv")
    conda:
        "../envs/tinylens.yaml"
    script:
        "../scripts/findings.py"


rule findings:
    input:
        rules.write_findings.output,
