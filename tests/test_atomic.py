import os
import stat
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pytest

from tinylens import atomic
from tinylens.atomic import atomic_path, remove_stale_temporaries, write_json, write_text
from tinylens.tables import Schema, write_table


@pytest.fixture
def umask():
    """Run the test under a chosen umask, restoring the old one after."""
    old = os.umask(0o022)
    yield lambda mask: os.umask(mask)
    os.umask(old)


def mode(path):
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("mask, expected", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_written_files_get_the_umask_mode_not_the_temporary_files(tmp_path, umask, mask, expected):
    umask(mask)
    write_text(tmp_path / "a.txt", "x")
    write_json(tmp_path / "b.json", {"k": 1})
    write_table(tmp_path / "c.parquet", Schema("t", {"v": pa.int32()}), {"v": np.arange(3, dtype=np.int32)})
    with atomic_path(tmp_path / "d.bin") as tmp:
        tmp.write_bytes(b"\0")
    for name in ("a.txt", "b.json", "c.parquet", "d.bin"):
        assert mode(tmp_path / name) == expected, (name, oct(mode(tmp_path / name)))


def test_text_is_utf8_whatever_the_locale(tmp_path):
    """Under the C locale with UTF-8 mode off Python's default text encoding is ASCII."""
    out = tmp_path / "t.txt"
    code = ("import sys; from tinylens.atomic import write_text, write_json; "
            "write_text(sys.argv[1], 'Caf\\u00e9 \\u2423'); write_json(sys.argv[1] + '.json', {'s': '\\u00e9'})")
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0"}
    env.pop("PYTHONIOENCODING", None)
    proc = subprocess.run([sys.executable, "-X", "utf8=0", "-c", code, str(out)], env=env, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert out.read_bytes() == "Café ␣".encode()


def test_files_and_the_directory_are_fsynced(tmp_path, monkeypatch):
    synced = []
    real = os.fsync

    def record(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(atomic.os, "fsync", record)
    write_text(tmp_path / "a.txt", "x")
    # the temporary file before the rename, then the directory holding the final name
    assert len(synced) == 2
    assert os.path.basename(synced[0]).startswith(".tmp-a.txt.")
    assert synced[1] == str(tmp_path)


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_killed_writers_temporary_is_removed_by_the_next_write(tmp_path):
    stale = tmp_path / f".tmp-a.parquet.{atomic._host()}.{dead_pid()}.abc123"
    stale.write_bytes(b"half a file")
    other_file = tmp_path / f".tmp-b.parquet.{atomic._host()}.{dead_pid()}.abc123"
    other_file.write_bytes(b"someone else's")
    live = tmp_path / f".tmp-a.parquet.{atomic._host()}.{os.getppid()}.abc123"
    live.write_bytes(b"a writer that still runs")
    write_text(tmp_path / "a.parquet", "done")
    assert not stale.exists()
    assert other_file.exists() and live.exists()  # only this file's, and only dead writers'
    assert remove_stale_temporaries(tmp_path) == [other_file]
    assert live.exists()


def test_sweep_is_recursive_and_leaves_other_hosts_alone(tmp_path):
    sub = tmp_path / "models/seed1.partial"
    sub.mkdir(parents=True)
    stale = sub / f".tmp-resume.pt.{atomic._host()}.{dead_pid()}.zz"
    stale.write_bytes(b"x")
    remote = sub / f".tmp-resume.pt.otherhost.{dead_pid()}.zz"
    remote.write_bytes(b"x")
    unrelated = sub / ".tmp-not-ours"
    unrelated.write_bytes(b"x")
    assert remove_stale_temporaries(tmp_path) == []
    assert remove_stale_temporaries(tmp_path, recursive=True) == [stale]
    assert remote.exists() and unrelated.exists()


def test_failed_write_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError):
        with atomic_path(tmp_path / "x") as tmp:
            tmp.write_text("partial")
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_dvc_ignores_byte_code_numba_cache_and_temporaries(repo):
    """What running the package or killing a writer leaves must not enter the hashes DVC records
    (else the code hash differs between machines and a restore refuses good artifacts)."""
    ignored = ["src/tinylens/__pycache__/search.cpython-311.pyc", "scripts/core/evaluate.pyc",
               "src/tinylens/__pycache__/search._bin_tile-118.py311.nbi",
               "src/tinylens/__pycache__/search._bin_tile-118.py311.1.nbc",
               "src/tinylens/__pycache__/search._bin_tile-118.py311.nbi.tmp.3f9a0c1d2b4e5f60",  # numba mid-save
               "src/tinylens/circuits/__pycache__/x.cpython-312.pyc",
               f"results/test/search/corpus/.tmp-shard_1-of-2.parquet.{atomic._host()}.{dead_pid()}.abc",
               "results/test/models/seed1.partial/.tmp-resume.pt.h.1.x"]
    kept = ["src/tinylens/core/search.py", "scripts/core/evaluate.py", "results/test/search/corpus/shard_1-of-2.parquet"]
    proc = subprocess.run([sys.executable, "-m", "dvc", "check-ignore", "--non-matching", "--details", *ignored, *kept],
                          cwd=repo, capture_output=True, text=True)
    verdict = {line.rsplit("\t", 1)[1]: not line.startswith("::") for line in proc.stdout.splitlines()}
    assert verdict == {**dict.fromkeys(ignored, True), **dict.fromkeys(kept, False)}, proc.stdout + proc.stderr


def test_the_pause_hook_stops_a_writer_right_after_the_named_file(tmp_path):
    """TINYLENS_PAUSE_AFTER: the named file is in place, the next is not, the signal file says where it stopped."""
    code = ("from tinylens.atomic import write_text, replace_dir; import os, sys; d = sys.argv[1]; "
            "os.mkdir(d + '/dir.new'); write_text(d + '/a.txt', 'a'); replace_dir(d + '/dir.new', d + '/dir'); "
            "write_text(d + '/b.txt', 'b')")
    for name, not_yet in (("a.txt", "dir"), ("dir", "b.txt"), ("other", None)):
        work, signal_file = tmp_path / name, tmp_path / f"{name}.paused"
        work.mkdir()
        env = {**os.environ, atomic.PAUSE_AFTER: name, atomic.PAUSE_SIGNAL: str(signal_file)}
        proc = subprocess.Popen([sys.executable, "-c", code, str(work)], env=env)
        try:
            for _ in range(1200):
                if signal_file.exists() or proc.poll() is not None:
                    break
                time.sleep(0.05)
            if not_yet is None:  # no file of that name: no pause
                assert proc.wait() == 0 and not signal_file.exists() and (work / "b.txt").read_text() == "b"
                continue
            assert proc.poll() is None, "the writer did not pause"
            assert signal_file.read_text().strip() == str(work / name)
            assert (work / name).exists() and not (work / not_yet).exists()
        finally:
            proc.kill()
            proc.wait()
