"""Atomic file writes: write under a temporary name in the same directory, then rename.

A job killed mid-write leaves at most a temporary file behind, never a file
under the final name that looks complete. The finished file:

- gets the mode a plain ``open()`` would give it (``0o666`` less the umask),
  not the ``0o600`` of :func:`tempfile.mkstemp`, so results are readable by
  whoever the umask allows;
- is flushed to disk (``fsync``) before the rename, and the directory after
  it, so a power cut never leaves an empty or half-written file under the
  final name;
- is UTF-8 when it is text, whatever the locale.

Temporary names are ``.tmp-<name>.<host>.<pid>.<random>``. A killed writer
leaves one behind; :func:`remove_stale_temporaries` deletes those whose
process is gone (the next write of the same file does it for its own name,
and the workflow sweeps its results directory when a run starts). DVC
ignores them (``.dvcignore``).

For tests of interrupted runs, ``TINYLENS_PAUSE_AFTER=<file name>`` makes the
writer stop right after that file has been renamed into place (and before
anything else is written): it creates the file named by
``TINYLENS_PAUSE_SIGNAL`` and sleeps until killed, so a test can ``kill -9``
a job between two of its renames at a moment it chooses.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

TMP_PREFIX = ".tmp-"
PAUSE_AFTER = "TINYLENS_PAUSE_AFTER"
PAUSE_SIGNAL = "TINYLENS_PAUSE_SIGNAL"
PAUSE_SECONDS = 600  # a paused writer nobody kills goes on after this long


def _pause_if_asked(final: Path) -> None:
    """The test hook of the module docstring: after ``final`` is in place, signal and wait to be killed."""
    if os.environ.get(PAUSE_AFTER) != final.name:
        return
    signal_file = os.environ.get(PAUSE_SIGNAL)
    if signal_file:
        Path(signal_file).write_text(f"{final}\n", encoding="utf-8")
    time.sleep(PAUSE_SECONDS)


def _umask() -> int:
    """The process umask, read without changing it where /proc allows."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)  # elsewhere: the classic read-by-setting, restored at once
    os.umask(mask)
    return mask


def default_file_mode() -> int:
    """The mode ``open(path, "w")`` gives a new file: ``0o666`` less the umask."""
    return 0o666 & ~_umask()


def _host() -> str:
    return socket.gethostname().split(".")[0].replace(".", "_") or "host"


def _temporary_prefix(final: Path) -> str:
    return f"{TMP_PREFIX}{final.name}.{_host()}.{os.getpid()}."


def _owner(tmp_name: str) -> tuple[str, int] | None:
    """(host, pid) of a temporary name this module made, or None."""
    parts = tmp_name.rsplit(".", 3)
    if len(parts) != 4 or not parts[0].startswith(TMP_PREFIX) or not parts[2].isdigit():
        return None
    return parts[1], int(parts[2])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def is_stale_temporary(path: Path) -> bool:
    """A temporary file of this module whose writer, on this host, no longer runs."""
    owner = _owner(path.name)
    return owner is not None and owner[0] == _host() and owner[1] != os.getpid() and not _alive(owner[1])


def remove_stale_temporaries(directory: str | os.PathLike[str], name: str | None = None,
                             recursive: bool = False) -> list[Path]:
    """Delete the temporaries a killed writer left in ``directory`` (only those of ``name`` if given,
    in every subdirectory if ``recursive``); returns what was removed. Temporaries of running
    processes, or of other hosts, are left alone."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    pattern = f"{TMP_PREFIX}{name}.*" if name is not None else f"{TMP_PREFIX}*"
    removed = []
    for path in directory.rglob(pattern) if recursive else directory.glob(pattern):
        if is_stale_temporary(path):
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def fsync_directory(directory: str | os.PathLike[str]) -> None:
    """Make a rename inside ``directory`` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success make it ``path``.

    On success the file gets the umask's normal mode, is fsynced, renamed onto
    ``path`` and the directory fsynced. On an exception the temporary file is
    removed and ``path`` is untouched.
    """
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(final.parent, final.name)
    fd, tmp_name = tempfile.mkstemp(prefix=_temporary_prefix(final), dir=final.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        os.chmod(tmp, default_file_mode())
        _fsync_file(tmp)
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_directory(final.parent)
    _pause_if_asked(final)


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` as UTF-8 (whatever the locale), atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(text.encode("utf-8"))


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def read_json(path: str | os.PathLike[str]) -> Any:
    """Read a JSON file as UTF-8, whatever the locale."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def replace_dir(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """Move the finished directory ``src`` onto ``dst``, replacing any old ``dst``."""
    dst = Path(dst)
    if dst.exists():
        shutil.rmtree(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    os.replace(src, dst)
    fsync_directory(dst.parent)
    _pause_if_asked(dst)
