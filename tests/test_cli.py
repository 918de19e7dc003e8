"""The one command, `tinylens VERB` (tinylens.cli): its verbs, their help, usage errors before any heavy import,
and the removed entry points."""

import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from tinylens.cli import VERBS

#: Every verb and the arguments its help names (an argument dropped or renamed fails here, and in the docs).
ARGUMENTS = {
    "explain": ["prompt", "--preset", "--workdir", "--config", "--out", "--top"],
    "restore": ["--preset", "--config"],
    "publish": ["--preset", "--config", "--no-push", "--message"],
    "export": ["model_dir", "out_dir", "--tolerance"],
    "findings": ["show", "snapshot", "render"],
}
#: The entry points the one command replaced, and its verb for each (docs/running.md "Commands").
REMOVED_SCRIPTS = {"tinylens-restore": "restore", "tinylens-publish": "publish", "tinylens-export-tl": "export"}
REMOVED_MODULES = {"tinylens.restore": "restore", "tinylens.publish": "publish", "tinylens.export": "export",
                   "tinylens.findings": "findings"}


def tinylens(*args, cwd=None):
    """`python -m tinylens ARGS` in a fresh interpreter, 80 columns wide."""
    return subprocess.run([sys.executable, "-m", "tinylens", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "COLUMNS": "80"})


def in_fresh_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "80"})


def test_help_lists_every_verb_on_one_line():
    proc = tinylens("--help")
    assert proc.returncode == 0, proc.stderr
    listed = dict(re.findall(r"^    (\w+)\s+(\S.*)$", proc.stdout, flags=re.M))
    assert list(listed) == list(VERBS) == list(ARGUMENTS)
    for verb, line in listed.items():
        assert line == VERBS[verb][0], f"`tinylens --help` wraps {verb}'s line: keep it under 66 characters"


@pytest.mark.parametrize("verb", list(ARGUMENTS))
def test_each_verb_has_its_own_help_naming_its_arguments(verb):
    proc = tinylens(verb, "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: tinylens {verb} ")
    missing = [arg for arg in ARGUMENTS[verb] if not re.search(rf"(^|[\s\[{{,]){re.escape(arg)}\b", proc.stdout)]
    assert not missing, f"`tinylens {verb} --help` does not name {missing}:\n{proc.stdout}"


def test_an_unknown_verb_or_none_is_a_usage_error_listing_the_verbs():
    for args in (["nope"], []):
        proc = tinylens(*args)
        assert proc.returncode == 2, proc
        assert all(verb in proc.stderr for verb in VERBS), proc.stderr


def test_help_and_usage_errors_come_before_any_heavy_import():
    """`tinylens` answers --help, a verb's --help and a bad argument without torch or numpy (2-3 CPU-seconds
    for torch): the verbs' modules are imported only once the arguments are good."""
    proc = in_fresh_python("""
        import contextlib, io, sys
        from tinylens.cli import main
        codes = []
        for args in (["--help"], *([verb, "--help"] for verb in VERB_NAMES), ["export", "/nonexistent", "out"],
                     ["explain"], ["restore", "--preset"]):
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
                try:
                    main(args)
                except SystemExit as stop:
                    codes.append(stop.code)
        print(codes, "torch" in sys.modules, "numpy" in sys.modules)
        print(err.getvalue())
    """.replace("VERB_NAMES", repr(list(VERBS))))
    lines = proc.stdout.splitlines()
    assert lines[0] == f"{[0] * (1 + len(VERBS)) + [2, 2, 2]} False False", proc.stdout + proc.stderr
    assert "argument --preset: expected one argument" in proc.stdout


def test_export_names_a_folder_that_is_no_model_before_importing_torch(tmp_path):
    proc = in_fresh_python(f"""
        import sys
        from tinylens.cli import main
        try:
            main(["export", {str(tmp_path)!r}, {str(tmp_path / "out")!r}])
        except SystemExit as stop:
            print(stop.code, "torch" in sys.modules)
    """)
    assert proc.stdout.split() == ["2", "False"], proc.stdout + proc.stderr
    assert f"{tmp_path} has no config.json: pass a trained model folder such as" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_each_verb_runs_through_the_one_command(tmp_path, repo):
    """Every verb's module does the work from the arguments the front door parsed (an empty folder: each
    says what is missing, naming itself, and changes nothing)."""
    explain = tinylens("explain", "--workdir", str(tmp_path), "And only l")
    assert explain.returncode == 1 and explain.stderr.startswith("tinylens explain: no finished 'small' run under")
    restore = tinylens("restore", "--preset", "test", cwd=tmp_path)
    assert restore.returncode == 1
    assert restore.stderr.startswith("tinylens restore: this checkout has no dvc.lock")
    refused = tinylens("restore", "--config", "seeds=1", cwd=tmp_path)
    assert refused.returncode == 1 and "only corpus_url may be set" in refused.stderr
    publish = tinylens("publish", "--preset", "test", "--no-push", "--config", "preset=paper", cwd=tmp_path)
    assert publish.returncode == 1 and publish.stderr.startswith("tinylens publish: --config preset=paper: only")
    shown = tinylens("findings", "show", str(repo / "docs/snapshot"))
    assert shown.returncode == 0 and shown.stdout.startswith("# Findings of the `snapshot` run")
    assert list(tmp_path.iterdir()) == []


def test_findings_render_check_compares_without_writing(tmp_path, repo):
    shutil.copytree(repo / "docs/snapshot", tmp_path / "docs/snapshot")
    readme = tmp_path / "README.md"
    shutil.copy(repo / "README.md", readme)
    assert tinylens("findings", "render", "--check", "--repo", str(tmp_path)).returncode == 0
    rendered = readme.read_text(encoding="utf-8")
    stale = re.sub(r"(\d+) models \(seeds", lambda m: f"{int(m[1]) + 1} models (seeds", rendered, count=1)
    assert stale != rendered  # one number of the rendered block changed by hand
    readme.write_text(stale, encoding="utf-8")
    proc = tinylens("findings", "render", "--check", "--repo", str(tmp_path))
    assert proc.returncode == 1 and "run `tinylens findings render`" in proc.stderr
    assert readme.read_text(encoding="utf-8") == stale
    assert tinylens("findings", "render", "--repo", str(tmp_path)).returncode == 0
    assert readme.read_text(encoding="utf-8") == (repo / "README.md").read_text(encoding="utf-8")


def test_the_one_command_is_the_only_console_script(repo):
    scripts = tomllib.loads((repo / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"tinylens": "tinylens.cli:main"}


@pytest.mark.parametrize("module", list(REMOVED_MODULES))
def test_a_removed_module_entry_point_names_the_verb_and_does_nothing(module, tmp_path):
    """`python -m tinylens.publish` and the like once did the work: now they exit 2 naming the verb, rather
    than succeed silently (a maintainer's script would think it had published)."""
    proc = subprocess.run([sys.executable, "-m", module, "--preset", "test"], capture_output=True, text=True,
                          cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert f"`tinylens {REMOVED_MODULES[module]}`" in proc.stderr
    assert list(tmp_path.iterdir()) == []


#: Where the commands are named: the docs, the workflow's files, CI and the tests.
NAMED_IN = ["README.md", "docs", "report", "rules", "Snakefile", "dvc.yaml", ".ci", "envs", "src", "tests",
            "scripts", "benchmarks", "config", "profiles"]


def test_no_file_names_a_removed_entry_point_but_the_note_that_says_so(repo):
    old = re.compile("|".join([*map(re.escape, REMOVED_SCRIPTS), *(re.escape(f"-m {m}") + r"\b"
                                                                   for m in REMOVED_MODULES)]))
    found = []
    for top in NAMED_IN:
        paths = [repo / top] if (repo / top).is_file() else sorted((repo / top).rglob("*"))
        for path in paths:
            if path.is_file() and path.suffix not in (".png", ".pyc", ".parquet") and path.name != "test_cli.py":
                for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                    if old.search(line) and "<!-- removed entry points -->" not in line and "moved(" not in line:
                        found.append(f"{path.relative_to(repo)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


def test_running_md_shows_todays_help(repo):
    """docs/running.md pastes `tinylens --help` (80 columns): it is the command's help of this checkout."""
    doc = (repo / "docs/running.md").read_text(encoding="utf-8")
    shown = re.search(r"```text\n\$ tinylens --help\n(.*?)```", doc, flags=re.S)
    assert shown, "docs/running.md lost its `tinylens --help`"
    assert shown.group(1) == tinylens("--help").stdout
