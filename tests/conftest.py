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


def _corpus_path() -> Path:
    return Path(os.environ.get("TINYLENS_CORPUS", REPO.parent / "shared/data/tinyshakespeare/input.txt"))


@pytest.fixture(scope="session")
def corpus_path() -> Path:
    """The verified offline corpus copy beside the repository (or $TINYLENS_CORPUS)."""
    path = _corpus_path()
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


class BackgroundRun:
    """A whole `test` preset run that starts as soon as the tests are collected and goes on beside them.

    Most tests run on one thread, and the SLURM test mostly waits for its cluster: a run started at nice 10
    takes the CPU they leave idle instead of running alone afterwards, and never slows them much."""

    def __init__(self, workdir: Path, corpus: Path):
        self.workdir = workdir
        self.log = workdir.parent / f"{workdir.name}.log"
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(
                snakemake_cmd(REPO, workdir, config=["preset=test", f"corpus_url={corpus.resolve()}"]),
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=lambda: os.nice(10))

    def results(self) -> Path:
        if self.proc.wait() != 0:
            pytest.fail(f"snakemake failed ({self.proc.returncode}); its output, {self.log}, ends:\n"
                        f"{self.log.read_text()[-6000:]}")
        return self.workdir / "results/test"

    def stop(self):
        if self.proc.poll() is None:  # interrupted session: Snakemake removes what its jobs left unfinished
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait()


#: The session's two runs of the whole `test` preset, by the fixture that returns each.
RUN_FIXTURES = ("finished_run", "second_run")
_background_runs: dict[str, BackgroundRun] = {}


def pytest_collection_modifyitems(session, config, items):
    """Tests that read a run of the preset go last (stable order otherwise); the runs they need start now."""
    def reads_a_run(item):
        return any(name in getattr(item, "fixturenames", ()) for name in RUN_FIXTURES)

    items.sort(key=reads_a_run)
    needed = {name for item in items for name in RUN_FIXTURES if name in getattr(item, "fixturenames", ())}
    if config.option.collectonly or not _corpus_path().is_file():
        return  # without the corpus the fixtures skip their tests
    for name in needed:
        _background_runs[name] = BackgroundRun(config._tmp_path_factory.mktemp(name), _corpus_path())


def pytest_sessionfinish(session, exitstatus):
    for run in _background_runs.values():
        run.stop()


def _run(name: str, request) -> Path:
    if name not in _background_runs:  # asked for only through request.getfixturevalue: start it now
        _background_runs[name] = BackgroundRun(request.config._tmp_path_factory.mktemp(name), _corpus_path())
    return _background_runs[name].results()


@pytest.fixture(scope="session")
def finished_run(corpus_path, request):
    """The whole `test` preset, run once for this session (shared by the workflow and DVC tests)."""
    return _run("finished_run", request)


@pytest.fixture(scope="session")
def second_run(corpus_path, request):
    """A second run of the whole `test` preset in a directory of its own (identical bytes expected)."""
    return _run("second_run", request)
