"""The family registry (tinylens.families) against the tree: every rule runs the script named after it in its
family's folder, every script and caption has its rule, every folder is a family's, and DVC versions exactly
what the families name."""

import re
from pathlib import Path

import pytest
import yaml

from tinylens.comparison import HEADLINE
from tinylens.families import ENTRY_POINTS, FAMILIES, RUN_OUTPUTS, family, folder_of_rules_file

REPO = Path(__file__).resolve().parents[1]
RULE = re.compile(r"^rule (\w+):\n((?:[ \t]+.*\n|\n)*)", re.M)
SCRIPT = re.compile(r'script:\s*\n\s*"\.\./scripts/([^"]+)"')
#: a family's table of figures in its rules file: figures("<category>", family="<family>", ..., <name>=dict(...
FIGURE_TABLE = re.compile(r"figures\(\n((?:    .*\n|\n)*?)\)")


def rule_scripts(rules: Path = REPO / "rules") -> dict[str, tuple[str, str]]:
    """rule name -> (its rules file's stem, the script it runs under scripts/), for rules written out."""
    found = {}
    for path in sorted(rules.glob("*.smk")):
        for name, body in RULE.findall(path.read_text(encoding="utf-8")):
            match = SCRIPT.search(body)
            if match:
                found[name] = (path.stem, match.group(1))
    return found


def figure_families(rules: Path = REPO / "rules") -> dict[str, str]:
    """figure name -> the family whose table names it."""
    found = {}
    for path in sorted(rules.glob("*.smk")):
        for body in FIGURE_TABLE.findall(path.read_text(encoding="utf-8")):
            owner = re.search(r'family="(\w+)"', body)
            if owner:
                found.update(dict.fromkeys(re.findall(r"^    (\w+)=dict\(", body, re.M), owner.group(1)))
    return found


def misnamed_scripts(scripts: dict[str, tuple[str, str]]) -> list[str]:
    """Rules whose script is not scripts/<family>/<rule>.py (an external model's step may run its family's
    script for the same step: external_<step> -> scripts/<family>/<step>.py)."""
    wrong = []
    for name, (stem, script) in scripts.items():
        expected = {f"{folder_of_rules_file(stem)}/{name}.py"}
        if stem == "external" and name.startswith("external_"):
            step = name.removeprefix("external_")
            expected |= {f"{f.key}/{step}.py" for f in FAMILIES}
        if script not in expected:
            wrong.append(f"rule {name} (rules/{stem}.smk) runs scripts/{script}, not scripts/{sorted(expected)[0]}")
    return wrong


def test_every_rule_runs_the_script_named_after_it_in_its_family_folder():
    scripts = rule_scripts()
    assert len(scripts) > 40
    assert not misnamed_scripts(scripts)


def test_the_naming_check_finds_a_misnamed_script(tmp_path):
    (tmp_path / "superposition.smk").write_text(
        'rule superposition_uniform:\n    output:\n        "x"\n    script:\n        "../scripts/superposition/train.py"\n')
    assert misnamed_scripts(rule_scripts(tmp_path)) == [
        "rule superposition_uniform (rules/superposition.smk) runs scripts/superposition/train.py, not "
        "scripts/superposition/superposition_uniform.py"]


def test_every_script_and_caption_has_its_rule_or_figure():
    used = {script for _, script in rule_scripts().values()}
    figures = figure_families()
    used |= {f"{fam}/plot_{name}.py" for name, fam in figures.items()}
    on_disk = {p.relative_to(REPO / "scripts").as_posix() for p in (REPO / "scripts").glob("*/*.py")}
    assert on_disk == used, f"scripts without a rule: {sorted(on_disk - used)}; missing: {sorted(used - on_disk)}"
    captions = {p.relative_to(REPO / "report").as_posix() for p in (REPO / "report").glob("*/*.rst")}
    expected = {f"{fam}/{name}.rst" for name, fam in figures.items()}
    expected |= {"findings/findings.rst", "comparison/paper_comparison.rst"}
    assert captions == expected, f"extra: {sorted(captions - expected)}; missing: {sorted(expected - captions)}"


def test_every_folder_is_a_family_or_an_entry_point():
    keys = {f.key for f in FAMILIES}
    for top in ("scripts", "report"):
        folders = {p.name for p in (REPO / top).iterdir() if p.is_dir()}
        assert folders <= keys | set(ENTRY_POINTS), (top, folders - keys - set(ENTRY_POINTS))
    packages = {p.parent.name for p in (REPO / "src/tinylens").glob("*/__init__.py")}
    assert packages == keys - {"comparison"}, packages ^ (keys - {"comparison"})
    stems = {p.stem for p in (REPO / "rules").glob("*.smk")} - {"common", "figures"}
    assert stems == {s for f in FAMILIES for s in f.rules} | {s for v in ENTRY_POINTS.values() for s in v}


def test_dvc_versions_exactly_what_the_families_name():
    stage = yaml.safe_load((REPO / "dvc.yaml").read_text(encoding="utf-8"))["stages"]["workflow"]["do"]
    outs = [next(iter(o)) if isinstance(o, dict) else o for o in stage["outs"]]
    outs.remove(HEADLINE.format(preset="${item}"))  # the run's headline, beside the other presets' (docs/dvc.md)
    prefix = "results/${item}/"
    assert all(o.startswith(prefix) for o in outs)
    named = [o for f in FAMILIES for o in f.outputs] + list(RUN_OUTPUTS)
    assert sorted(o.removeprefix(prefix) for o in outs) == sorted(named)


def test_every_metrics_file_is_written_by_a_rule_of_its_family():
    scripts = rule_scripts()
    for f in FAMILIES:
        for path, rule in f.metrics.values():
            assert rule in scripts, f"{f.key}: {path} is written by rule {rule}, which no rules file defines"
            assert folder_of_rules_file(scripts[rule][0]) == f.key, (f.key, rule)


def test_unknown_names_are_refused_with_the_list():
    with pytest.raises(KeyError, match="families are"):
        family("nonexistent")
    with pytest.raises(KeyError, match="belongs to no family"):
        folder_of_rules_file("nonexistent")
