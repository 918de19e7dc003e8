"""Every rule is given exactly the params its script reads.

Snakemake reruns a job when its params change: a key a script does not read, handed to it anyway (a
whole config section, a resource figure, a threshold only the summary uses), reruns that job for
nothing, the heaviest of a family included. The rules' params come from the loaded workflow; what a
script reads is parsed from its source (``j.params.<name>``, ``j.params["<name>"]``, an alias of
``j.params``, and ``j.device``, which reads the ``device`` param).
"""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import run_snakemake

#: Loads the workflow (test preset) without planning any job, and prints each rule's params and script.
LOAD = """
import json, sys
from pathlib import Path
from types import SimpleNamespace
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings

with SnakemakeApi(OutputSettings()) as api:
    wf = api.workflow(resource_settings=ResourceSettings(cores=1),
                      config_settings=ConfigSettings(config={"preset": "test"}),
                      snakefile=Path(sys.argv[1]) / "Snakefile", workdir=Path(sys.argv[2]))
    rules = {}
    for rule in wf._workflow.rules:
        values = {name: rule.params[index] for name, (index, _) in rule.params._names.items()}
        rules[rule.name] = {"script": rule.script, "params": {k: None if callable(v) else v for k, v in values.items()}}
print("RULES " + json.dumps(rules, default=str))
"""


@pytest.fixture(scope="module")
def rules(repo, tmp_path_factory):
    proc = subprocess.run([sys.executable, "-c", LOAD, str(repo), str(tmp_path_factory.mktemp("load"))],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.split("RULES ", 1)[1])


class ParamsRead(ast.NodeVisitor):
    """What a script reads of its rule's params: names, the keys read by subscript from a dict-valued
    name, the names used whole (passed on, unpacked), and any use of the params object itself."""

    def __init__(self, tree: ast.AST):
        self.aliases, self.jobs = set(), set()
        self.value_aliases: dict[str, str] = {}  # a local name bound to one param (`dyn = p.dynamics`)
        self.names: set[str] = set()
        self.subkeys: dict[str, set[str]] = {}
        self.whole: set[str] = set()
        self.escapes: list[str] = []
        self.parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if isinstance(node, ast.withitem) and isinstance(node.optional_vars, ast.Name):
                self.jobs.add(node.optional_vars.id)
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    pairs = (zip(target.elts, node.value.elts) if isinstance(target, ast.Tuple)
                             and isinstance(node.value, ast.Tuple) else [(target, node.value)])
                    for name, value in pairs:
                        if isinstance(name, ast.Name) and self.is_params(value):
                            self.aliases.add(name.id)
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                value = node.value
                if isinstance(value, ast.Attribute) and self.params_object(value.value):
                    self.value_aliases[node.targets[0].id] = value.attr
        self.visit(tree)

    @staticmethod
    def is_params(node) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == "params"

    def params_object(self, node) -> bool:
        return self.is_params(node) or (isinstance(node, ast.Name) and node.id in self.aliases)

    def read(self, name: str, node: ast.AST) -> None:
        self.names.add(name)
        parent = self.parents.get(node)
        if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name) \
                and parent.targets[0].id in self.value_aliases:
            return  # `dyn = p.dynamics`: what is read is what `dyn` is used for
        if isinstance(parent, ast.Subscript) and parent.value is node:
            if isinstance(parent.slice, ast.Constant) and isinstance(parent.slice.value, str):
                self.subkeys.setdefault(name, set()).add(parent.slice.value)
                return
        self.whole.add(name)

    def visit_Attribute(self, node):
        if self.params_object(node.value):
            self.read(node.attr, node)
        elif isinstance(node.value, ast.Name) and node.value.id in self.jobs and node.attr == "device":
            self.read("device", node)
        elif self.is_params(node) and not isinstance(self.parents.get(node),
                                                     (ast.Attribute, ast.Subscript, ast.Tuple, ast.Assign)):
            self.escapes.append(ast.unparse(self.parents.get(node)))
        self.generic_visit(node)

    def visit_Subscript(self, node):
        if self.params_object(node.value) and isinstance(node.slice, ast.Constant):
            self.read(node.slice.value, node)
        self.generic_visit(node)

    def visit_Name(self, node):
        parent = self.parents.get(node)
        if node.id in self.value_aliases and isinstance(node.ctx, ast.Load):
            self.read(self.value_aliases[node.id], node)
        if node.id in self.aliases and isinstance(node.ctx, ast.Load) and not (
                isinstance(parent, (ast.Attribute, ast.Subscript)) and parent.value is node):
            self.escapes.append(ast.unparse(parent))


def script_reads(path: Path) -> ParamsRead:
    return ParamsRead(ast.parse(path.read_text(encoding="utf-8")))


def test_the_parser_sees_every_way_a_script_reads_its_params():
    reads = ParamsRead(ast.parse(
        "with job(snakemake) as j:\n"
        "    p, inp = j.params, j.input\n"
        "    f(p.alpha, j.params['beta'], j.device, p.spec['steps'], p.spec['lr'], **p.settings)\n"))
    assert reads.names == {"alpha", "beta", "device", "spec", "settings"} and not reads.escapes
    assert reads.subkeys == {"spec": {"steps", "lr"}} and reads.whole == {"alpha", "beta", "device", "settings"}
    assert ParamsRead(ast.parse("with job(snakemake) as j:\n    p = j.params\n    g(p)\n")).escapes == ["g(p)"]
    reads = ParamsRead(ast.parse("with job(snakemake) as j:\n    dyn = j.params.dynamics\n    g(dyn['seed'])\n"))
    assert reads.subkeys == {"dynamics": {"seed"}} and not reads.whole


def test_every_rule_is_given_exactly_the_params_its_script_reads(repo, rules):
    scripted = {name: rule for name, rule in rules.items() if rule["script"]}
    assert len(scripted) > 60
    problems = []
    for name, rule in sorted(scripted.items()):
        # a figure's rule names its script by the {figure} wildcard and its family param (rules/figures.smk): the
        # family is read by the rule's script: path, not by the script
        figure = SimpleNamespace(figure=name.split("plot_", 1)[-1])
        family = SimpleNamespace(family=rule["params"].get("family"))
        script = (repo / "rules" / rule["script"].format(wildcards=figure, params=family)).resolve()
        reads = script_reads(script)
        given = set(rule["params"]) - ({"family"} if "{params.family}" in rule["script"] else set())
        if reads.escapes:
            problems.append(f"{name}: {script.name} hands the whole params on ({reads.escapes}); read each by name")
        if given - reads.names:
            problems.append(f"{name}: given {sorted(given - reads.names)}, which {script.name} never reads")
        if reads.names - given:
            problems.append(f"{name}: {script.name} reads {sorted(reads.names - given)}, which the rule does not give")
        if any(re.search(r'"(threads|resources)": ', json.dumps(v)) for v in rule["params"].values()):
            problems.append(f"{name}: its params hold threads or resources (the rule's threads:/resources: say those)")
        for key, subkeys in reads.subkeys.items():
            value = rule["params"].get(key)
            if key not in reads.whole and isinstance(value, dict) and set(value) != subkeys:
                problems.append(f"{name}: params.{key} holds {sorted(value)}, {script.name} reads {sorted(subkeys)}")
    assert not problems, "\n".join(problems)


def test_the_train_job_is_given_the_models_shape_as_its_config_json_names_it(rules):
    """n_embed, config.json's name for d_model (tinylens.model_config.FILE_NAMES): Snakemake compares a job's
    params with those recorded when its outputs were made, so the models trained before the rename keep theirs."""
    assert rules["train_model"]["params"]["model"] == {"n_embed": 32, "n_layer": 6, "n_head": 2, "block_size": 32,
                                                       "dropout": 0.0}


@pytest.mark.workflow
def test_a_summary_only_threshold_reruns_only_the_summary(finished_run, repo, test_config, tmp_path):
    """Change a phase threshold of the training-dynamics summary in a finished run: Snakemake plans the
    summary (its params changed) and what reads its output, never the measurement of the checkpoints."""
    change = tmp_path / "change.yaml"  # laid over config/config.yaml key by key
    change.write_text("presets: {test: {dynamics: {phases: {min_swing: 0.2}}}}\n", encoding="utf-8")
    proc = run_snakemake(repo, finished_run.parent.parent, "-n", "--configfile", str(change), config=test_config)
    out = proc.stdout + proc.stderr
    planned = dict(re.findall(r"^(\w+)\s+(\d+)$", out.split("Job stats:", 1)[1].split("\n\n", 1)[0], flags=re.M))
    assert planned.get("dynamics_summary") == "1", out[-3000:]
    assert "dynamics_measure" not in planned and "train_model" not in planned, planned
    reasons = re.findall(r"^rule (\w+):.*?\n    reason: ([^\n]*)", out, flags=re.M | re.S)
    assert [rule for rule, reason in reasons if "params" in reason.lower()] == ["dynamics_summary"], reasons


def test_a_models_files_are_asked_for_one_way(repo):
    """Through model_files() in rules/common.smk, by the names of tinylens.weights.MODEL_FILES: a path to a
    model's file written out in a rule file is a second name for it (and breaks when the folder changes)."""
    written = [f"{smk.name}:{i}" for smk in sorted((repo / "rules").glob("*.smk")) if smk.name != "common.smk"
               for i, line in enumerate(smk.read_text(encoding="utf-8").splitlines(), 1)
               if re.search(r"models/seed[^/\"]*/", line)]
    assert not written, f"write model_files(seed, ...) instead: {written}"
