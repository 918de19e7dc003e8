"""The workflow's plan, from a dry run in an empty directory (no job runs, no corpus needed)."""

import re
import subprocess
import sys

import pytest


@pytest.fixture(scope="module")
def plan(repo, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("plan")
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(repo / "Snakefile"), "-d", str(workdir),
                           "--cores", "1", "-n", "--config", "preset=test"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs = re.findall(r"^(?:local)?rule (\w+):\n(.*?)(?=^\S|\Z)", proc.stdout + proc.stderr, flags=re.M | re.S)
    assert len(jobs) > 50
    return jobs


def files(body: str, field: str) -> set[str]:
    found = re.search(rf"^\s+{field}: (.*)$", body, flags=re.M)
    return set(found.group(1).split(", ")) if found else set()


def test_rule_all_lists_every_file_the_workflow_writes(plan):
    """Snakemake does not notice a deleted intermediate whose consumers are up to date unless a target
    names it: so a lost shard, dump or family table would go unnoticed (and a restore or a figure
    regeneration would then need it)."""
    targets = [files(body, "input") for rule, body in plan if rule == "all"]
    assert len(targets) == 1
    written = {path: rule for rule, body in plan if rule != "all" for path in files(body, "output")}
    assert len(written) > 100
    unlisted = sorted(f"{path} ({rule})" for path, rule in written.items() if path not in targets[0])
    assert not unlisted, "not in rule all:\n" + "\n".join(unlisted)


def test_every_job_declares_its_memory_and_time(plan):
    """What a cluster scheduler reserves (profiles/slurm); threads are checked where a rule uses more than one
    by the rules themselves (``threads:``). Data-sized rules compute theirs from the table sizes, which a dry
    run on an empty directory cannot know yet (``<TBD>``)."""
    undeclared = set()
    for rule, body in plan:
        if rule == "all":
            continue
        resources = re.search(r"^\s+resources: (.*)$", body, flags=re.M)
        resources = resources.group(1) if resources else ""
        if not (re.search(r"\bmem_mb=(\d+|<TBD>)", resources) and re.search(r"\bruntime=(\d+|<TBD>)", resources)):
            undeclared.add(f"{rule}: {resources}")
    assert not undeclared, "\n".join(sorted(undeclared))


def family_targets(repo) -> list[str]:
    """The core's target and each analysis family's: a rule named after its rules file (rules/circuits.smk
    defines `rule circuits`, which only collects)."""
    names = ["core"]
    for smk in sorted((repo / "rules").glob("*.smk")):
        rule = re.search(rf"^rule {smk.stem}:\n(.*?)(?=^\S|\Z)", smk.read_text(), flags=re.M | re.S)
        if rule and "output:" not in rule.group(1):  # a target collects; rules/sample.smk's `sample` writes
            names.append(smk.stem)
    return names


def test_the_core_and_family_targets_together_are_rule_all(repo, plan, tmp_path):
    """`snakemake <target>` for the core and each family (docs/running.md "Targets"): nothing of `all` is left out
    of every target, and no target makes what `all` does not."""
    names = family_targets(repo)
    assert len(names) >= 3, names
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(repo / "Snakefile"), "-d", str(tmp_path),
                           "--cores", "1", "-n", *names, "--config", "preset=test"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs = re.findall(r"^(?:local)?rule (\w+):\n(.*?)(?=^\S|\Z)", proc.stdout + proc.stderr, flags=re.M | re.S)
    by_target = {rule: files(body, "input") for rule, body in jobs if rule in names}
    assert sorted(by_target) == sorted(names)
    assert all(by_target.values()), by_target
    everything = [files(body, "input") for rule, body in plan if rule == "all"][0]
    assert set().union(*by_target.values()) == everything


def test_readme_targets_table_names_every_target(repo):
    """docs/running.md "Targets" lists the core and every family target, and nothing that is not one."""
    readme = (repo / "docs/running.md").read_text(encoding="utf-8")
    section = re.search(r"^### Targets\n(.*?)(?=^#)", readme, flags=re.M | re.S)
    assert section, "docs/running.md lost its Targets section"
    listed = re.findall(r"^\| `(\w+)` \|", section.group(1), flags=re.M)
    assert sorted(listed) == sorted(family_targets(repo))
