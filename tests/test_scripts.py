"""The scripts under scripts/: thin, and all started the same way (tinylens.jobs)."""

import ast
import importlib
from pathlib import Path

import pytest

SCRIPTS = sorted((Path(__file__).resolve().parents[1] / "scripts").glob("*/*.py"))
MAX_CODE_LINES = 40


def code_lines(path: Path) -> int:
    """Lines of code: not blank, not a comment, not the module docstring."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    doc = tree.body[0] if tree.body and isinstance(tree.body[0], ast.Expr) else None
    skip = set(range(doc.lineno, doc.end_lineno + 1)) if doc else set()
    lines = path.read_text(encoding="utf-8").splitlines()
    return sum(1 for i, line in enumerate(lines, 1) if i not in skip and line.strip() and not line.strip().startswith("#"))


def test_there_are_scripts():
    assert len(SCRIPTS) > 50


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_script_starts_with_the_job_prelude_and_stays_thin(path):
    """`with job(snakemake) as j:` pins torch's threads to the rule's, sends the log where the rule says and
    reads and writes JSON as UTF-8; a script that does any of that by itself does it differently."""
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    withs = [node for node in tree.body if isinstance(node, ast.With)]
    assert len(withs) == 1, f"{path.name}: one `with job(snakemake) as j:` block holds the job"
    item = withs[0].items[0]
    assert ast.unparse(item.context_expr) == "job(snakemake)" and ast.unparse(item.optional_vars) == "j", path.name
    for banned in ("log_to(", "set_num_threads(", "json.load", "read_text()", "select_device(", "snakemake.params",
                   "snakemake.input", "snakemake.output"):
        assert banned not in text, f"{path.name} uses {banned}: the job prelude (tinylens.jobs) does this"
    assert code_lines(path) <= MAX_CODE_LINES, f"{path.name}: {code_lines(path)} code lines; move logic to src/"


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_what_a_script_imports_from_the_library_exists(path):
    """A script runs only inside its job: a name moved or renamed in src/ would surface there, late."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tinylens"):
            module = importlib.import_module(node.module)
            missing = [a.name for a in node.names if not hasattr(module, a.name)]
            assert not missing, f"{path.name}: {node.module} has no {missing}"


def test_every_family_package_is_laid_out_the_same_way():
    """A reader who knows one family finds the next one's tables, figures and headline numbers in the same
    three modules (docs/adding-an-analysis-family.md)."""
    src = Path(__file__).resolve().parents[1] / "src/tinylens"
    families = sorted(p.parent.name for p in src.glob("*/__init__.py"))
    assert len(families) >= 5, families
    missing = {family: [m for m in ("schemas.py", "plots.py", "summary.py") if not (src / family / m).is_file()]
               for family in families}
    assert not any(missing.values()), missing


#: Scripts that only read tables and draw or summarise them: they start without torch, whose import
#: (2-3 CPU-s) is most of such a job's cost. The library imports torch inside the functions that use it.
TORCH_FREE = (
    "core/build_strings", "circuits/circuits_summary", "core/download_corpus", "dynamics/dynamics_summary",
    "external/external_dynamics_summary", "external/external_findings",
    "findings/write_findings", "core/hellinger_summary", "comparison/paper_comparison", "core/paper_prompts",
    "phase_change/phase_change_summary", "attention/attention_summary", "superposition/superposition_summary",
    "supporting/supporting_metrics", "core/tokenize", "core/training_summary",
    *(f"{p.parent.name}/{p.stem}" for p in SCRIPTS if p.stem.startswith("plot_")),
)


def test_the_table_reading_scripts_start_without_torch():
    import subprocess
    import sys

    imports = {}
    for name in TORCH_FREE:
        tree = ast.parse((SCRIPTS[0].parents[1] / f"{name}.py").read_text(encoding="utf-8"))
        imports[name] = "\n".join(ast.unparse(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
                                  and getattr(n, "module", None) != "__future__")
    code = "import sys\n" + "".join(
        f"{body}\nif 'torch' in sys.modules:\n    sys.exit({name!r} + ' imports torch')\n" for name, body in imports.items())
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_planning_the_workflow_imports_neither_torch_nor_scipy(repo):
    """Every Snakemake invocation (a dry run, each SLURM job step) parses the Snakefile and its rules: what
    they import from the library must not pull in torch or scipy (2-3 CPU-s each; a dry run took 6.8 CPU-s
    with them, 4.4 without)."""
    import re
    import subprocess
    import sys

    files = [repo / "Snakefile", *sorted((repo / "rules").glob("*.smk"))]
    lines = sorted({m for f in files for m in re.findall(r"^(?:from tinylens[\w.]* import .+|import tinylens[\w.]*)$",
                                                          f.read_text(encoding="utf-8"), flags=re.M)})
    assert len(lines) >= 10, lines
    code = "import sys\n" + "\n".join(lines) + "\nprint(sorted({'torch', 'scipy'} & set(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]", proc.stdout
