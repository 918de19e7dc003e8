"""Workflow conventions: snakemake --lint, snakefmt, ruff, and the conda environment file."""

import importlib.util
import os
import re
import subprocess
import sys

import pytest
import yaml

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

# pyproject name -> conda-forge name, where they differ
CONDA_NAMES = {"torch": "pytorch", "snakemake": "snakemake-minimal"}


def require(module, extra="test"):
    """Skip where a checker is missing, but never in CI: .ci/run installs the test extra."""
    if importlib.util.find_spec(module) is None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run this check: {module} comes with the '{extra}' extra")
        pytest.skip(f'{module} not installed (pip install -e ".[{extra}]")')


def check(cmd, repo):
    proc = subprocess.run(cmd, cwd=repo, capture_output=True, text=True)
    assert proc.returncode == 0, f"{' '.join(cmd[2:])} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout + proc.stderr


def test_snakemake_lint_is_clean(repo):
    out = check([sys.executable, "-m", "snakemake", "--lint", "--config", "preset=test"], repo)
    assert "Lints for" not in out


def test_snakemake_files_are_snakefmt_formatted(repo):
    """Fix with: snakefmt Snakefile rules/ (settings in pyproject.toml)."""
    require("snakefmt")
    check([sys.executable, "-m", "snakefmt", "--check", "--compact-diff", "Snakefile", "rules/"], repo)


def test_python_is_ruff_clean(repo):
    """Fix with: ruff check --fix . (settings in pyproject.toml)."""
    require("ruff")
    check([sys.executable, "-m", "ruff", "check", "--no-cache", "."], repo)


def requirement_names(requirements):
    return {re.match(r"[A-Za-z0-9_.-]+", r).group(0).lower().replace("_", "-") for r in requirements}


def test_conda_environment_installs_what_the_workflow_and_the_tests_need(repo):
    project = tomllib.loads((repo / "pyproject.toml").read_text())["project"]
    needed = requirement_names(project["dependencies"] + project["optional-dependencies"]["test"]
                               + project["optional-dependencies"]["tl"])
    env = yaml.safe_load((repo / "envs/tinylens.yaml").read_text())
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    provided = requirement_names(conda) | requirement_names(pip)
    missing = {n for n in needed if CONDA_NAMES.get(n, n) not in provided}
    assert not missing, f"envs/tinylens.yaml lacks {sorted(missing)} (pyproject.toml asks for them)"
    # Snakemake refuses a python entry in a workflow-level environment, and deploys a copy of
    # the file elsewhere, so a relative path (pip install -e ..) would point nowhere.
    assert "python" not in requirement_names(conda)
    assert not any(p.startswith(("-e", ".", "/")) for p in pip)
