import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
# Test this checkout's package, not one pip-installed from another checkout: here and in the processes tests start.
sys.path.insert(0, str(REPO / "src"))
os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Every in-process test runs torch on one thread: their tensors are tiny, and a second thread only adds
    waiting (the toy models' training steps cost 14 times the CPU on two threads). A test that sets its own
    thread count still can; the count is set again before the next test."""
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def config() -> dict:
    return yaml.safe_load((REPO / "config/config.yaml").read_text())


@pytest.fixture(scope="session")
def corpus_path() -> Path:
    """The verified offline corpus copy beside the repository (or $TINYLENS_CORPUS)."""
    path = Path(os.environ.get("TINYLENS_CORPUS", REPO.parent / "shared/data/tinyshakespeare/input.txt"))
    if not path.is_file():
        pytest.skip(f"corpus copy not found at {path}; set TINYLENS_CORPUS to a local TinyShakespeare input.txt "
                    "to run the tests that need it")
    return path.resolve()


def snakemake_cmd(repo, workdir, *args, config=()):
    """Snakemake on the repository's Snakefile, writing into ``workdir``. Targets go before --config."""
    return [sys.executable, "-m", "snakemake", "-s", str(repo / "Snakefile"), "-d", str(workdir),
            "--cores", "2", *args, "--config", *config]


def run_snakemake(repo, workdir, *args, config=(), check=True):
    proc = subprocess.run(snakemake_cmd(repo, workdir, *args, config=config), capture_output=True, text=True)
    if check and proc.returncode != 0:
        pytest.fail(f"snakemake failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    return proc


@pytest.fixture(scope="session")
def test_config(corpus_path):
    return ["preset=test", f"corpus_url={corpus_path}"]


@pytest.fixture(scope="session")
def test_preset(config):
    return config["presets"]["test"]


#: The second, identical run of the `test` preset (tests/test_reproducible.py), started beside the first.
_SECOND_RUN = {}


@pytest.fixture(scope="session")
def finished_run(request, repo, tmp_path_factory, test_config):
    """The whole `test` preset, run once for this session (shared by the workflow and DVC tests).

    When a collected test asks for :func:`second_run`, that run starts at the same time, in its own
    directory: one run alone leaves a core idle in its serial stretches, two side by side fill it."""
    workdir = tmp_path_factory.mktemp("workflow")
    if any("second_run" in getattr(item, "fixturenames", ()) for item in request.session.items):
        second = tmp_path_factory.mktemp("second_run")
        _SECOND_RUN["dir"] = second
        _SECOND_RUN["log"] = log = second / "snakemake-output.txt"  # a file: a pipe nobody reads would fill and block
        with open(log, "w") as out:
            _SECOND_RUN["proc"] = subprocess.Popen(snakemake_cmd(repo, second, config=test_config), stdout=out,
                                                   stderr=subprocess.STDOUT)
    run_snakemake(repo, workdir, config=test_config)
    return workdir / "results/test"


@pytest.fixture(scope="session")
def second_run(finished_run, repo, tmp_path_factory, test_config):
    """A second run of the whole `test` preset in a directory of its own (identical bytes expected)."""
    if "proc" not in _SECOND_RUN:  # finished_run was made before any test asked for this one
        second = tmp_path_factory.mktemp("second_run")
        run_snakemake(repo, second, config=test_config)
        return second / "results/test"
    proc = _SECOND_RUN["proc"]
    if proc.wait() != 0:
        out = _SECOND_RUN["log"].read_text(encoding="utf-8", errors="replace")
        pytest.fail(f"the second run failed ({proc.returncode}):\n{out[-6000:]}")
    return _SECOND_RUN["dir"] / "results/test"
