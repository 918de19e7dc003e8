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


@pytest.fixture(scope="session")
def finished_run(repo, tmp_path_factory, test_config):
    """The whole `test` preset, run once for this session (shared by the workflow and DVC tests)."""
    workdir = tmp_path_factory.mktemp("workflow")
    run_snakemake(repo, workdir, config=test_config)
    return workdir / "results/test"


@pytest.fixture(scope="session")
def second_run(repo, tmp_path_factory, test_config):
    """A second run of the whole `test` preset in a directory of its own (identical bytes expected)."""
    workdir = tmp_path_factory.mktemp("second_run")
    run_snakemake(repo, workdir, config=test_config)
    return workdir / "results/test"
