"""Data versioning round trips: run, publish, fresh clone, `dvc pull`, restore, regenerate figures.

The `test` preset's artifacts (from the session's workflow run) are published
(`tinylens publish`: dvc commit, dvc push, git commit of dvc.lock) from a
throwaway git repository holding the project's files, to a local directory
remote and to an S3-compatible server (moto) on 127.0.0.1. Every command that
runs in a clone uses that clone's own package (PYTHONPATH), as a user's
checkout would.
"""

import filecmp
import hashlib
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tinylens import atomic

pytestmark = pytest.mark.workflow

OUTS = ["data", "models", "samples", "strings", "activations", "search", "approx", "evaluation",
        "case_studies", "figures", "metrics",
        "circuits",  # circuits family
        "supporting",  # supporting analyses
        "superposition",  # superposition family
        "dynamics",  # training-dynamics family
        "attention",  # attention dynamics
        "comparison"]  # the published numbers beside ours
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
S3_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def sh(*cmd, cwd, check=True, env=None):
    cwd = Path(cwd)
    own = {"PYTHONPATH": str(cwd / "src")} if (cwd / "src/tinylens").is_dir() else {}
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV, **S3_ENV, **own, **(env or {})})
    if check and proc.returncode != 0:
        pytest.fail(f"{' '.join(map(str, cmd))} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def dvc(*args, cwd, check=True, env=None):
    return sh(sys.executable, "-m", "dvc", *args, cwd=cwd, check=check, env=env)


def restore(cwd, *config, check=True):
    return sh(sys.executable, "-m", "tinylens", "restore", "--preset", "test",
              *(["--config", *config] if config else []),
              cwd=cwd, check=check)


def publish(cwd, *args, check=True):
    return sh(sys.executable, "-m", "tinylens", "publish", "--preset", "test", *args, cwd=cwd, check=check)


def snakemake(cwd, *args, check=True):
    return sh(sys.executable, "-m", "snakemake", *args, "--config", "preset=test", cwd=cwd, check=check)


def jobs_of(output: str) -> set[str]:
    """Rules in Snakemake's job table (empty when nothing is to be done)."""
    if "Job stats:" not in output:
        return set()
    table = output.split("Job stats:")[1].split("\n\n")[0]
    return set(re.findall(r"^(\w+)\s+\d+$", table, re.M)) - {"job", "total", "all"}


def use_remote(origin, name, url, **options):
    """Make ``name`` the default remote, verifying downloads as the project's own remote does."""
    options.setdefault("verify", "true")
    dvc("remote", "add", "--force", "--default", name, url, cwd=origin)
    for key, value in options.items():
        dvc("remote", "modify", name, key, value, cwd=origin)
    sh("git", "commit", "-qam", f"remote {name}", cwd=origin)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return tmp_path_factory.mktemp("dvc-store") / "remote"


@pytest.fixture(scope="module")
def origin(repo, finished_run, tmp_path_factory, store):
    """A maintainer's repository: the project's files, the test run's artifacts, published with one command."""
    origin = tmp_path_factory.mktemp("dvc") / "origin"
    tracked = sh("git", "ls-files", cwd=repo).stdout.split()
    for name in tracked:
        if (repo / name).is_file():
            (origin / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(repo / name, origin / name)
    sh("git", "init", "-q", "-b", "main", cwd=origin)
    sh("git", "add", "-A", cwd=origin)
    sh("git", "commit", "-qm", "project", cwd=origin)
    use_remote(origin, "store", str(store))
    shutil.copytree(finished_run, origin / "results/test")
    shutil.copy2(finished_run.parent / "headline/test.json", origin / "results/headline/test.json")
    out = publish(origin).stdout
    assert "published preset 'test': dvc.lock committed, artifacts pushed" in out
    assert sh("git", "status", "--porcelain", cwd=origin).stdout == ""  # dvc.lock and the headline are committed
    assert "workflow@test" in sh("git", "show", "HEAD:dvc.lock", cwd=origin).stdout
    assert sh("git", "show", "--name-only", "--format=", "HEAD", cwd=origin).stdout.split() == [
        "dvc.lock", "results/headline/test.json"]
    assert sh("git", "log", "-1", "--format=%s", cwd=origin).stdout.strip() == "Artifacts of the test preset"
    return origin


def clone_of(origin, clone):
    sh("git", "clone", "-q", origin, clone, cwd=origin.parent)
    return clone


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture(scope="module")
def user_clone(origin, tmp_path_factory):
    """A user's clone after the README's commands: pull, restore; its package byte-compiled and run first."""
    clone = clone_of(origin, tmp_path_factory.mktemp("user") / "tinylens")
    # what running the package leaves beside its sources: byte code and numba's cache (a different
    # machine's copy of them, as far as DVC's code hash is concerned)
    sh(sys.executable, "-m", "compileall", "-q", "src", "scripts", cwd=clone)
    sh(sys.executable, "-c", "import tinylens.core.search, tinylens.plots, tinylens.restore", cwd=clone)
    (clone / "src/tinylens/__pycache__/search._bin_tile-118.py311.nbi").write_bytes(b"numba index")
    assert list((clone / "src/tinylens/__pycache__").glob("*.pyc"))
    dvc("pull", "workflow@test", cwd=clone)
    # a killed job's leftover inside a pulled folder
    stale = clone / f"results/test/search/corpus/.tmp-shard_1-of-2.parquet.{atomic._host()}.{dead_pid()}.x1"
    stale.write_bytes(b"half a shard")
    restored = restore(clone)  # the README's `tinylens restore --preset test`, with this clone's package
    assert "Snakemake now plans nothing" in restored.stdout
    return clone


def test_a_byte_compiled_clone_restores_to_identical_artifacts_and_plans_nothing(origin, user_clone):
    for name in OUTS:
        left, right = origin / "results/test" / name, user_clone / "results/test" / name
        files = sorted(p.relative_to(left) for p in left.rglob("*") if p.is_file())
        assert files == sorted(p.relative_to(right) for p in right.rglob("*")
                               if p.is_file() and not p.name.startswith(".tmp-")), name
        match, mismatch, errors = filecmp.cmpfiles(left, right, [str(f) for f in files], shallow=False)
        assert not mismatch and not errors, (name, mismatch, errors)
    plan = snakemake(user_clone, "-n", "--cores", "1").stdout
    assert jobs_of(plan) == set(), plan[-2000:]


FIGURES = {
    "loss_curves", "hellinger_histogram", "threshold_sweep", "case_studies", "robustness", "controls",
    # circuits family
    "composition_heatmaps", "composition_symmetry", "composition_kendall_tau", "composition_over_training",
    "composition_across_seeds",
    # superposition family
    "superposition_polygons", "superposition_phase_change", "superposition_loss_crossing",
    "superposition_dimensionality", "superposition_fraction_histogram", "superposition_dimensionality_training",
    "superposition_phase_diagram", "superposition_correlated",
    # supporting analyses
    "ablation", "final_layernorm", "ffwd_endpoint", "vector_sums", "token_subspaces", "criterion", "attention_vs_ffwd",
    # training-dynamics family
    "dynamics_energy_kl", "dynamics_icl_score", "dynamics_loss_by_position", "dynamics_head_scores",
    "dynamics_energy_depth",
    # the induction-head phase change
    "phase_change_curves", "phase_change_loss_derivative", "phase_change_controls", "phase_change_energy_kl",
    # attention dynamics
    "attention_diagonals", "attention_absorption", "attention_hull", "lens_curves", "next_token_cosine",
    "probe_accuracy"}


#: One figure of each family, drawn for real after the plan of all of them is checked.
DRAWN = {"loss_curves", "composition_heatmaps", "superposition_polygons", "ablation", "dynamics_icl_score",
         "phase_change_controls", "attention_diagonals"}


def test_figures_regenerate_without_heavy_jobs(user_clone, tmp_path):
    figures = user_clone / "results/test/figures"
    before = sorted(figures.glob("*.png"))
    assert {f.stem for f in before} == FIGURES and DRAWN <= FIGURES
    for figure in before:
        shutil.copy2(figure, tmp_path / figure.name)  # modification times kept
        figure.unlink()
    # With every figure gone, the README's `snakemake --cores all` plans exactly the figure rules (each figure
    # <name>.png is drawn by rule plot_<name>), nothing upstream of them: the restored tables suffice.
    planned = snakemake(user_clone, "--cores", "2", "-n")
    assert jobs_of(planned.stdout + planned.stderr) == {f"plot_{f.stem}" for f in before}
    # Drawing them all costs a minute of CPU; one of each family is drawn, the rest put back as they were.
    for figure in before:
        if figure.stem not in DRAWN:
            shutil.copy2(tmp_path / figure.name, figure)
    proc = snakemake(user_clone, "--cores", "2")
    assert jobs_of(proc.stdout + proc.stderr) == {f"plot_{name}" for name in DRAWN}
    assert sorted(figures.glob("*.png")) == before
    snakemake(user_clone, "--report", "report.html")
    assert "case_studies.png" in (user_clone / "report.html").read_text(errors="ignore")


def test_metrics_show_prints_the_run_headline(user_clone, finished_run):
    """In a restored clone, `dvc metrics show` prints the headline git brought, without a warning for the presets
    not published (the table's width and the diff: tests/test_dvc_metrics.py)."""
    import json

    proc = dvc("metrics", "show", "--json", cwd=user_clone)
    assert "failed to load" not in proc.stderr
    data = next(iter(json.loads(proc.stdout).values()))["data"]
    assert list(data) == ["results/headline/test.json"]
    written = json.loads((finished_run.parent / "headline/test.json").read_text())
    assert data["results/headline/test.json"]["data"] == written
    assert set(data["results/headline/test.json"]["data"]["H"]) == {"heldout", "paper", "published", "seeds"}


def test_restore_refuses_other_code_or_config_and_unsafe_overrides(user_clone):
    metadata = sorted(p.name for p in (user_clone / ".snakemake/metadata").iterdir())
    for changed in ("src/tinylens/core/approx.py", "config/config.yaml"):
        path = user_clone / changed
        original = path.read_bytes()
        path.write_bytes(original + b"\n# an edit\n")
        try:
            refused = restore(user_clone, check=False)
            assert refused.returncode == 1
            assert "not those dvc.lock records" in refused.stderr
            assert re.search(r"changed deps .*" + re.escape(changed.split("/")[0]), refused.stderr), refused.stderr
        finally:
            path.write_bytes(original)
    refused = restore(user_clone, "seeds={original: 1, alternates: []}", check=False)
    assert refused.returncode == 1 and "only corpus_url may be set" in refused.stderr
    assert sorted(p.name for p in (user_clone / ".snakemake/metadata").iterdir()) == metadata


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def s3_server():
    port = free_port()
    server = subprocess.Popen([shutil.which("moto_server") or "moto_server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline and server.poll() is None, "moto_server did not start"
            time.sleep(0.2)
    import boto3

    boto3.client("s3", endpoint_url=endpoint, **{k.lower(): v for k, v in S3_ENV.items() if k != "AWS_DEFAULT_REGION"},
                 region_name="us-east-1").create_bucket(Bucket="tinylens")
    yield endpoint
    server.terminate()
    server.wait(timeout=10)


def test_s3_round_trip(origin, tmp_path, s3_server):
    use_remote(origin, "s3", "s3://tinylens/artifacts", endpointurl=s3_server)
    dvc("push", "workflow@test", cwd=origin)
    clone = clone_of(origin, tmp_path / "clone")
    dvc("pull", "workflow@test", cwd=clone)
    restore(clone)
    for name in ("models", "search", "metrics"):
        left, right = origin / "results/test" / name, clone / "results/test" / name
        files = [str(p.relative_to(left)) for p in left.rglob("*") if p.is_file()]
        assert filecmp.cmpfiles(left, right, files, shallow=False)[0] == files


def test_unreachable_remote_is_a_clear_error_and_restore_changes_nothing(origin, tmp_path):
    use_remote(origin, "gone", "s3://tinylens/artifacts", endpointurl=f"http://127.0.0.1:{free_port()}")
    clone = clone_of(origin, tmp_path / "clone")
    # no retries: a refused connection fails at once instead of backing off for minutes
    pull = dvc("pull", "workflow@test", cwd=clone, check=False, env={"AWS_MAX_ATTEMPTS": "1", "AWS_RETRY_MODE": "standard"})
    assert pull.returncode != 0
    assert re.search(r"failed to (pull|fetch)|could not connect|unable to connect", pull.stderr + pull.stdout, re.I)
    refused = restore(clone, check=False)
    assert refused.returncode == 1
    assert "not those dvc.lock records" in refused.stderr and "dvc pull workflow@test" in refused.stderr
    assert not (clone / ".snakemake/metadata").exists()


def test_no_published_artifacts_is_a_clear_error(origin, tmp_path):
    clone = clone_of(origin, tmp_path / "clone")
    (clone / "dvc.lock").unlink()  # a commit from before anything was published
    refused = restore(clone, check=False)
    assert refused.returncode == 1
    assert "this checkout has no dvc.lock: no artifacts of preset 'test' were published" in refused.stderr
    assert "tinylens publish --preset test" in refused.stderr
    assert not (clone / ".snakemake").exists()


def test_corrupted_object_is_caught_before_anything_changes(origin, tmp_path, store):
    use_remote(origin, "store", str(store))
    # Damage the stored copy of one file of the search summaries in the remote.
    target = origin / "results/test/search/corpus/shard_1-of-2.parquet"
    digest = hashlib.md5(target.read_bytes()).hexdigest()
    stored = store / "files/md5" / digest[:2] / digest[2:]
    assert stored.exists()
    good = stored.read_bytes()
    stored.write_bytes(good[: len(good) // 2])
    try:
        clone = clone_of(origin, tmp_path / "clone")
        pull = dvc("pull", "workflow@test", cwd=clone, check=False)
        assert pull.returncode != 0 and "results/test/search" in pull.stderr  # the remote verifies downloads
        refused = restore(clone, check=False)
        assert refused.returncode == 1
        assert "results/test/search" in refused.stderr and "not those dvc.lock records" in refused.stderr
        assert not (clone / ".snakemake/metadata").exists()
    finally:
        stored.write_bytes(good)


def test_an_incomplete_set_is_neither_published_nor_restored(user_clone):
    """A shard deleted before `dvc commit`: DVC records the incomplete folder; tinylens refuses it."""
    shard = user_clone / "results/test/search/heldout/shard_2-of-2.parquet"
    shard.unlink()
    refused = publish(user_clone, "--no-push", check=False)
    assert refused.returncode == 1
    assert "not complete and up to date, so nothing was published" in refused.stderr
    assert "results/test/search/heldout/shard_2-of-2.parquet (search_shard: missing)" in refused.stderr
    dvc("commit", "--force", "workflow@test", cwd=user_clone)  # what a maintainer could do by hand
    assert dvc("status", "workflow@test", cwd=user_clone).stdout.strip().endswith("up to date.")
    before = {p: p.stat().st_mtime_ns for p in (user_clone / "results/test").rglob("*") if p.is_file()}
    refused = restore(user_clone, check=False)
    assert refused.returncode == 1
    assert "dvc.lock records an incomplete set of artifacts for preset 'test'" in refused.stderr
    assert "results/test/search/heldout/shard_2-of-2.parquet (search_shard: missing)" in refused.stderr
    assert {p: p.stat().st_mtime_ns for p in (user_clone / "results/test").rglob("*") if p.is_file()} == before


def test_the_readme_user_path_is_the_one_these_tests_run(repo):
    """The README's "regenerate everything without training" commands are, with the preset named `test`,
    the ones the `user_clone` fixture and the tests after it run (clone, pull, restore, snakemake)."""
    import yaml

    readme = (repo / "README.md").read_text(encoding="utf-8")
    block = re.search(r"\*\*Users: regenerate everything without training\.\*\*.*?```bash\n(.*?)```", readme,
                      flags=re.S)
    assert block, "README lost the users' DVC path"
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.strip()]
    assert commands == ["git clone <repository-url> tinylens && cd tinylens", "pip install -e .",
                        "dvc pull workflow@small", "tinylens restore --preset small", "snakemake --cores all",
                        "snakemake --report report.html"]
    # the console script is the command restore() runs as `python -m tinylens restore`
    assert 'tinylens = "tinylens.cli:main"' in (repo / "pyproject.toml").read_text()
    assert "small" in yaml.safe_load((repo / "dvc.yaml").read_text())["stages"]["workflow"]["foreach"]


def test_every_output_of_a_run_is_versioned_by_dvc(finished_run, repo):
    """Each file a run writes (but its logs and benchmark records) lies under one of dvc.yaml's outs, so `dvc
    pull` brings back a complete run (a family whose folder is missing there leaves a pulled clone that Snakemake
    would redo); its headline, outside results/<preset>/, too (git carries it: tests/test_dvc_metrics.py)."""
    stage = next(iter(yaml.safe_load((repo / "dvc.yaml").read_text(encoding="utf-8"))["stages"].values()))["do"]
    tracked = [next(iter(entry)).replace("results/${item}/", "") for entry in stage["outs"]]
    unversioned = sorted(
        {path.relative_to(finished_run).as_posix() for path in finished_run.rglob("*") if path.is_file()}
        - {p for p in (path.relative_to(finished_run).as_posix() for path in finished_run.rglob("*"))
           if p.startswith(("logs/", "benchmarks/")) or any(p == t or p.startswith(t + "/") for t in tracked)})
    assert not unversioned, f"outputs no dvc.yaml entry versions: {unversioned[:10]}"
    assert (finished_run.parent / f"headline/{finished_run.name}.json").is_file()
    assert "results/headline/${item}.json" in tracked
