"""Data versioning round trips: run, `dvc push`, fresh clone, `dvc pull`, restore, regenerate figures.

The `test` preset's artifacts (from the session's workflow run) are committed
to DVC in a throwaway git repository holding the project's files, pushed to a
local directory remote and to an S3-compatible server (moto) on 127.0.0.1.
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

import pytest

pytestmark = pytest.mark.workflow

OUTS = ["data", "models", "samples", "strings", "activations", "search", "approx", "evaluation",
        "case_studies", "figures", "metrics",
        "circuits"]  # circuits family
HEAVY = ("train_model", "dump_activations", "search_shard")
CIRCUITS_PLOTS = {"plot_composition_heatmaps", "plot_composition_symmetry", "plot_composition_kendall_tau",
                  "plot_composition_over_training", "plot_composition_across_seeds"}
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
S3_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def sh(*cmd, cwd, check=True, env=None):
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV, **S3_ENV, **(env or {})})
    if check and proc.returncode != 0:
        pytest.fail(f"{' '.join(map(str, cmd))} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def dvc(*args, cwd, check=True):
    return sh(sys.executable, "-m", "dvc", *args, cwd=cwd, check=check)


def restore(cwd, corpus_path, check=True):
    return sh(sys.executable, "-m", "tinylens.restore", "--preset", "test", "--config", f"corpus_url={corpus_path}",
              cwd=cwd, check=check)


def planned(cwd, corpus_path) -> str:
    proc = sh(sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--config", "preset=test",
              f"corpus_url={corpus_path}", cwd=cwd)
    return proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def origin(repo, finished_run, tmp_path_factory):
    """A git repository with the project's files and the test preset's artifacts committed to DVC."""
    origin = tmp_path_factory.mktemp("dvc") / "origin"
    tracked = sh("git", "ls-files", cwd=repo).stdout.split()
    for name in tracked:
        if (repo / name).is_file():
            (origin / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(repo / name, origin / name)
    sh("git", "init", "-q", "-b", "main", cwd=origin)
    sh("git", "add", "-A", cwd=origin)
    sh("git", "commit", "-qm", "project", cwd=origin)
    shutil.copytree(finished_run, origin / "results/test")
    dvc("commit", "--force", "workflow@test", cwd=origin)  # adopt the run's outputs: no `dvc repro` needed
    sh("git", "add", "-A", cwd=origin)
    sh("git", "commit", "-qm", "artifacts of the test preset", cwd=origin)
    return origin


def use_remote(origin, name, url, **options):
    """Make ``name`` the default remote, verifying downloads as the project's own remote does."""
    options.setdefault("verify", "true")
    dvc("remote", "add", "--force", "--default", name, url, cwd=origin)
    for key, value in options.items():
        dvc("remote", "modify", name, key, value, cwd=origin)
    sh("git", "commit", "-qam", f"remote {name}", cwd=origin)


def round_trip(origin, clone, corpus_path):
    dvc("push", "workflow@test", cwd=origin)
    sh("git", "clone", "-q", origin, clone, cwd=origin.parent)
    dvc("pull", "workflow@test", cwd=clone)
    out = restore(clone, corpus_path).stdout
    assert "no training, dumping or search" in out
    for name in OUTS:
        left, right = origin / "results/test" / name, clone / "results/test" / name
        files = sorted(p.relative_to(left) for p in left.rglob("*") if p.is_file())
        assert files == sorted(p.relative_to(right) for p in right.rglob("*") if p.is_file()), name
        match, mismatch, errors = filecmp.cmpfiles(left, right, [str(f) for f in files], shallow=False)
        assert not mismatch and not errors, (name, mismatch, errors)
    plan = planned(clone, corpus_path)
    assert not re.search(rf"^({'|'.join(HEAVY)})\s", plan, flags=re.M), plan[-2000:]


def test_local_remote_round_trip_regenerates_figures_without_heavy_jobs(origin, tmp_path, corpus_path):
    use_remote(origin, "store", str(tmp_path / "remote"))
    clone = tmp_path / "clone"
    round_trip(origin, clone, corpus_path)
    for figure in (clone / "results/test/figures").glob("*.png"):
        figure.unlink()
    proc = sh(sys.executable, "-m", "snakemake", "--cores", "2", "--config", "preset=test",
              f"corpus_url={corpus_path}", cwd=clone)
    ran = set(re.findall(r"^(\w+)\s+\d+$", (proc.stdout + proc.stderr).split("Job stats:")[1].split("\n\n")[0], re.M))
    assert ran - {"job", "total", "all"} == {"plot_loss_curves", "plot_hellinger_histogram", "plot_threshold_sweep",
                                             "plot_case_studies",
                                             *CIRCUITS_PLOTS}
    assert len(list((clone / "results/test/figures").glob("*.png"))) == 4 + len(CIRCUITS_PLOTS)
    sh(sys.executable, "-m", "snakemake", "--report", "report.html", "--config", "preset=test", cwd=clone)
    assert "case_studies.png" in (clone / "report.html").read_text(errors="ignore")


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


def test_s3_round_trip(origin, tmp_path, corpus_path, s3_server):
    use_remote(origin, "s3", "s3://tinylens/artifacts", endpointurl=s3_server)
    round_trip(origin, tmp_path / "clone", corpus_path)


def test_unreachable_remote_is_a_clear_error_and_restore_changes_nothing(origin, tmp_path, corpus_path):
    use_remote(origin, "gone", "s3://tinylens/artifacts", endpointurl=f"http://127.0.0.1:{free_port()}")
    clone = tmp_path / "clone"
    sh("git", "clone", "-q", origin, clone, cwd=tmp_path)
    pull = dvc("pull", "workflow@test", cwd=clone, check=False)
    assert pull.returncode != 0
    assert re.search(r"failed to (pull|fetch)|could not connect|unable to connect", pull.stderr + pull.stdout, re.I)
    refused = restore(clone, corpus_path, check=False)
    assert refused.returncode == 1
    assert "not those dvc.lock records" in refused.stderr and "dvc pull workflow@test" in refused.stderr
    assert not (clone / ".snakemake/metadata").exists()


def test_corrupted_object_is_caught_before_anything_changes(origin, tmp_path, corpus_path):
    remote = tmp_path / "remote"
    use_remote(origin, "store", str(remote))
    dvc("push", "workflow@test", cwd=origin)
    # Damage the stored copy of one file of the search summaries in the remote.
    target = origin / "results/test/search/corpus/shard_1-of-2.parquet"
    digest = hashlib.md5(target.read_bytes()).hexdigest()
    stored = remote / "files/md5" / digest[:2] / digest[2:]
    assert stored.exists()
    stored.write_bytes(stored.read_bytes()[: len(stored.read_bytes()) // 2])
    clone = tmp_path / "clone"
    sh("git", "clone", "-q", origin, clone, cwd=tmp_path)
    pull = dvc("pull", "workflow@test", cwd=clone, check=False)
    assert pull.returncode != 0 and "results/test/search" in pull.stderr  # the remote verifies downloads
    refused = restore(clone, corpus_path, check=False)
    assert refused.returncode == 1
    assert "results/test/search" in refused.stderr and "not those dvc.lock records" in refused.stderr
    assert not (clone / ".snakemake/metadata").exists()
