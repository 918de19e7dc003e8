import logging
import sys

import pytest

from tinylens.logs import log_to


class Collect(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.fixture
def root_handler():
    """A handler the host program configured before the job ran."""
    root = logging.getLogger()
    handler, level = Collect(), root.level
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    yield handler
    root.removeHandler(handler)
    root.setLevel(level)


def test_log_to_writes_the_job_log_and_leaves_the_hosts_logging_alone(tmp_path, root_handler):
    path = tmp_path / "logs/job.log"
    with log_to(path) as log:
        log.info("wrote %s", "x.parquet")
        logging.getLogger("tinylens.train").info("step 1")
        print("a progress bar", file=sys.stderr)
    text = path.read_text(encoding="utf-8")
    assert "INFO tinylens: wrote x.parquet" in text and "tinylens.train: step 1" in text
    assert "a progress bar" in text
    root = logging.getLogger()
    assert root_handler in root.handlers and root.level == logging.WARNING
    assert not any(isinstance(h, logging.StreamHandler) and getattr(h, "stream", None) is not None
                   and getattr(h.stream, "name", "") == str(path) for h in root.handlers)
    logging.getLogger("tinylens").warning("after the job")
    assert root_handler.messages[-1] == "after the job"
    assert "after the job" not in path.read_text(encoding="utf-8")


def test_a_failing_job_logs_the_traceback_and_says_so_on_the_console(tmp_path, capsys):
    path = tmp_path / "job.log"
    with pytest.raises(ValueError):
        with log_to(path):
            raise ValueError("the input is bad")
    assert "Traceback" in path.read_text(encoding="utf-8")
    err = capsys.readouterr().err
    assert "tinylens: ValueError: the input is bad" in err and str(path) in err


def test_log_file_is_utf8(tmp_path):
    path = tmp_path / "job.log"
    with log_to(path) as log:
        log.info("prompt %r", "naïve ␣")
    assert "naïve ␣" in path.read_bytes().decode("utf-8")
