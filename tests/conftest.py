import os
import signal
import subprocess
import sys
import time
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


def _corpus_file() -> Path:
    return Path(os.environ.get("TINYLENS_CORPUS", REPO.parent / "shared/data/tinyshakespeare/input.txt"))


@pytest.fixture(scope="session")
def corpus_path() -> Path:
    """The verified offline corpus copy beside the repository (or $TINYLENS_CORPUS)."""
    path = _corpus_file()
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


def _test_run_config(corpus: Path) -> list[str]:
    return ["preset=test", f"corpus_url={corpus}"]


@pytest.fixture(scope="session")
def test_config(corpus_path):
    return _test_run_config(corpus_path)


@pytest.fixture(scope="session")
def test_preset(config):
    from tinylens.config import resolve_preset

    return resolve_preset(config, "test")


#: The fixtures of the runs that go on in the background, in the order their tests go: first the tests that
#: read no run (beside the first run, which starts with the session), then those that read the first run
#: (beside the SLURM run and the second run, which start when it finishes), then the SLURM test (its run
#: mostly waits on the cluster's status checks), then the byte comparison.
BACKGROUND = ("finished_run", "slurm_run", "second_run")


def _wanted(items, name: str) -> bool:
    return any(name in getattr(item, "fixturenames", ()) for item in items)


def pytest_collection_modifyitems(session, config, items):
    """The tests that read a background run go last, so the tests before them run meanwhile."""
    def waits_for(item):
        names = getattr(item, "fixturenames", ())
        return max((i + 1 for i, name in enumerate(BACKGROUND) if name in names), default=0)
    items.sort(key=waits_for)


class BackgroundRun:
    """A Snakemake run in the background, beside the tests that do not need it yet: the first `test`-preset
    run beside the tests that read no run, the second (at nice 10) and the SLURM run beside the tests that
    read the first. Each foreground test mostly uses one core or waits on a subprocess, so a run beside it
    fills the other core. (Both `test`-preset runs beside everything from the start cost 2,500 CPU-s where
    the suite took 1,900 with the runs one after the other: too many processes for two cores.) Its stdout
    and stderr go to files beside ``workdir``."""

    def __init__(self, cmd: list[str], workdir: Path, nice: int = 10):
        self.workdir = workdir
        self.stdout, self.stderr = (workdir.parent / f"{workdir.name}.{kind}" for kind in ("stdout", "stderr"))
        self.started, self.wall = time.monotonic(), None
        with open(self.stdout, "w") as out, open(self.stderr, "w") as err:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=err, start_new_session=True,
                                         preexec_fn=lambda: os.nice(nice))

    def wait(self, timeout: float | None = None) -> int:
        """The exit status; the wall time from start to finish is kept in ``self.wall``."""
        code = self.proc.wait(timeout=timeout)
        if self.wall is None:
            self.wall = time.monotonic() - self.started
        return code

    def output(self) -> str:
        return self.stdout.read_text() + self.stderr.read_text()

    def results(self) -> Path:
        """The run's results/test once it has finished; the test fails with the end of its log if it failed."""
        if self.wait() != 0:
            pytest.fail(f"snakemake failed ({self.proc.returncode}); {self.stderr} ends:\n{self.output()[-5000:]}")
        return self.workdir / "results/test"

    def stop(self) -> None:
        if self.proc.poll() is None:  # the session ended first: Snakemake removes its unfinished outputs
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait()


@pytest.fixture(scope="session")
def _background():
    """What goes on in the background, by the name of the fixture that waits for it; stopped at the end."""
    started: dict[str, object] = {}
    yield started
    for run in reversed(started.values()):
        run.stop()


@pytest.fixture(scope="session", autouse=True)
def _first_run_in_background(request, tmp_path_factory, _background):
    """The `test` preset's run starts with the session when a collected test reads it (and the corpus is
    there), beside the tests that read no run: they go first and use about one core."""
    if _wanted(request.session.items, "finished_run") and _corpus_file().is_file():
        workdir = tmp_path_factory.mktemp("workflow")
        config = _test_run_config(_corpus_file().resolve())
        _background["finished_run"] = BackgroundRun(snakemake_cmd(REPO, workdir, config=config), workdir, nice=0)


@pytest.fixture(scope="session")
def finished_run(repo, tmp_path_factory, test_config, request, _background):
    """The whole `test` preset, run once for this session (shared by the workflow and DVC tests). When it
    finishes, the runs the collected tests need besides it start in the background."""
    results = _background["finished_run"].results()
    items = request.session.items
    if _wanted(items, "second_run"):
        second = tmp_path_factory.mktemp("second_run")
        _background["second_run"] = BackgroundRun(snakemake_cmd(repo, second, config=test_config), second)
    if _wanted(items, "slurm_run"):
        import slurm_cluster

        _background["slurm_run"] = slurm_cluster.SlurmRun.start(repo, tmp_path_factory.mktemp("slurm"), test_config)
    return results


@pytest.fixture(scope="session")
def second_run(finished_run, _background):
    """A second run of the whole `test` preset in a directory of its own (identical bytes expected)."""
    return _background["second_run"].results()


@pytest.fixture(scope="session")
def slurm_run(finished_run, _background):
    """The SLURM profile's run of a slice of the workflow on a single-node test cluster (tests/slurm_cluster.py),
    started beside the tests when the first run finished; finished, or why it could not start."""
    run = _background["slurm_run"]
    if run.unavailable is None:
        run.wait(timeout=900)
    return run
