"""The job prelude every workflow script starts with (tinylens.jobs)."""

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from tinylens.jobs import job


def fake_snakemake(tmp_path, threads=1, **params):
    """What Snakemake hands a script, as far as the prelude reads it."""
    return SimpleNamespace(log=[str(tmp_path / "logs/job.log")], input=SimpleNamespace(), output=SimpleNamespace(),
                           params=SimpleNamespace(**params), wildcards=SimpleNamespace(), threads=threads)


@pytest.fixture
def torch_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("threads", [1, 3])
def test_torch_runs_on_the_threads_the_rule_declares(tmp_path, torch_threads, threads):
    torch.set_num_threads(2 if threads != 2 else 1)
    with job(fake_snakemake(tmp_path, threads=threads)) as j:
        assert torch.get_num_threads() == threads == j.threads


def test_torch_imported_after_the_prelude_gets_the_rules_threads_too(tmp_path):
    """A script that imports torch only later (through a library call) must not fall back to every core."""
    code = ("import sys, types\n"
            "from tinylens.jobs import job\n"
            "assert 'torch' not in sys.modules\n"
            f"smk = types.SimpleNamespace(log=[{str(tmp_path / 'job.log')!r}], input=None, output=None, params=None,"
            " wildcards=None, threads=1)\n"
            "with job(smk):\n"
            "    import torch\n"
            "    print(torch.get_num_threads())\n")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["1"]


def test_the_log_json_and_device_of_a_job(tmp_path, torch_threads):
    out = tmp_path / "out/summary.json"
    with job(fake_snakemake(tmp_path, device="cpu")) as j:
        j.log.info("working on %s", "ü")
        j.write_json(out, {"name": "Æthelstan"})
        assert j.read_json(out) == {"name": "Æthelstan"}
        assert j.device == torch.device("cpu")
    assert json.loads(out.read_bytes().decode("utf-8")) == {"name": "Æthelstan"}  # UTF-8 whatever the locale
    log = (tmp_path / "logs/job.log").read_text(encoding="utf-8")
    assert "working on ü" in log and f"wrote {out}" in log


def test_a_failing_job_leaves_its_traceback_in_the_log(tmp_path, torch_threads):
    with pytest.raises(KeyError):
        with job(fake_snakemake(tmp_path)):
            raise KeyError("threshold")
    assert "Traceback" in (tmp_path / "logs/job.log").read_text(encoding="utf-8")
