# The run's findings in words (tinylens.findings): every family's sentences, formatted from this run's
# metrics, in results/<preset>/findings.md, first on the report's front page. After every family: it reads their
# metrics (a family this workflow does not define is skipped in the text, with a note).
# Its inputs (findings_metrics) are in common.smk.


rule write_findings:
    input:
        findings_metrics,
    output:
        report(
            results("findings.md"),
            caption="../report/findings/findings.rst",
            category="Findings",
        ),
    params:
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
        "../scripts/findings/write_findings.py"


rule findings:
    input:
        rules.write_findings.output,
