import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
# Test this checkout's package, not one pip-installed from another checkout: here and in the processes tests start.
sys.path.insert(0, str(REPO / "src"))
os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])


def _test_preset_seeds() -> list[int]:
    from tinylens.config import all_seeds

    return all_seeds({**yaml.safe_load((REPO / "config/config.yaml").read_text()), "preset": "test"})


#: The seeds the `test` preset trains (the original first): 1337 and the first alternate, 1442.
TEST_SEEDS = _test_preset_seeds()


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


def pytest_collection_modifyitems(session, config, items):
    """The byte comparison of two runs goes last: its second run goes on in the background meanwhile."""
    items.sort(key=lambda item: "second_run" in getattr(item, "fixturenames", ()))


class BackgroundRun:
    """A whole `test` preset run at nice 10 beside the tests that follow: they mostly use one core and
    wait on subprocesses, and leave the rest of the CPU idle. (Both runs beside the tests from the start
    cost 2,500 CPU-s where the suite took 1,900 with the runs one after the other: too many processes for
    two cores.)"""

    def __init__(self, repo: Path, workdir: Path, config):
        self.workdir, self.log = workdir, workdir.parent / f"{workdir.name}.log"
        cmd = snakemake_cmd(repo, workdir, config=config)
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                         preexec_fn=lambda: os.nice(10))

    def results(self) -> Path:
        if self.proc.wait() != 0:
            pytest.fail(f"snakemake failed ({self.proc.returncode}); {self.log} ends:\n{self.log.read_text()[-5000:]}")
        return self.workdir / "results/test"

    def stop(self) -> None:
        if self.proc.poll() is None:  # the session ended first: Snakemake removes its unfinished outputs
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait()


@pytest.fixture(scope="session")
def _second_run_in_background(repo, tmp_path_factory, test_config):
    """Where the second run goes on, once started (by the first run's fixture when a test needs both)."""
    runs = []
    yield runs
    for run in runs:
        run.stop()


@pytest.fixture(scope="session")
def finished_run(repo, tmp_path_factory, test_config, request, _second_run_in_background):
    """The whole `test` preset, run once for this session (shared by the workflow and DVC tests)."""
    workdir = tmp_path_factory.mktemp("workflow")
    run_snakemake(repo, workdir, config=test_config)
    if any("second_run" in getattr(item, "fixturenames", ()) for item in request.session.items):
        _second_run_in_background.append(BackgroundRun(repo, tmp_path_factory.mktemp("second_run"), test_config))
    return workdir / "results/test"


@pytest.fixture(scope="session")
def second_run(finished_run, _second_run_in_background):
    """A second run of the whole `test` preset in a directory of its own (identical bytes expected)."""
    return _second_run_in_background[0].results()
