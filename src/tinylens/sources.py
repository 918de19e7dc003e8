"""Where an external model's checkpoints are, and whether they can be loaded here (method.md §13).

Torch-free: the workflow asks it while it plans (rules/external.smk), so a model that cannot be
loaded stops the run before any job starts. A *source* is a Hugging Face hub name whose checkpoints
are revisions (``EleutherAI/pythia-70m`` at ``step1000``), or a local folder with one subfolder per
checkpoint (``<folder>/step1000/``). Loading is :func:`tinylens.external.load_bridge`.

Loading needs the ``tl`` extra (TransformerLens, transformers, huggingface_hub): :func:`check_extra` says
so in one line, with the install command, before anything imports them. :func:`checkpoint_stream` fetches
a hub model's checkpoints one at a time into a folder of the job's own and drops each once measured (at
most two on disk), instead of filling the Hugging Face cache with the whole suite.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import socket
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

#: The key of an external model in the tables and metrics of our seeds (their scripts read them unchanged).
EXTERNAL_SEED = 0
#: The revision (and local subfolder) of a checkpoint by default: Pythia's names.
REVISION = "step{step}"
HUB = ("huggingface.co", 443)
#: What loading an external model imports: the ``tl`` extra of pyproject.toml brings all three.
EXTRA_MODULES = ("huggingface_hub", "transformers", "transformer_lens")
INSTALL_EXTRA = 'pip install -e ".[tl]"'
#: Files of a hub revision that no PyTorch loader reads (other frameworks' weights): never fetched.
NOT_FETCHED = ["*.msgpack", "*.h5", "*.ot", "*.onnx", "*.tflite", "*.gguf"]

log = logging.getLogger(__name__)


class ExternalModelUnavailable(RuntimeError):
    """A model or checkpoint that cannot be loaded here; the message says what to do."""


class MissingExtra(ExternalModelUnavailable):
    """The ``tl`` extra is not installed: the message names it and the install command."""


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # an import hook that refuses it, or a half-installed package
        return False


def check_extra(modules: Sequence[str] = EXTRA_MODULES) -> None:
    """Raise :class:`MissingExtra` (one line: the extra and its install command) unless every module that
    loading an external model imports can be found; finds them without importing them (no cost at planning)."""
    missing = [m for m in modules if not _importable(m)]
    if missing:
        raise MissingExtra(f"external models need the `tl` extra ({', '.join(missing)} not installed): "
                           f"{INSTALL_EXTRA}")


def is_local(source: str) -> bool:
    return Path(source).expanduser().is_dir()


def checkpoint_folder(source: str, step: int, revision: str = REVISION) -> Path:
    return Path(source).expanduser() / revision.format(step=step)


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hugging Face hub answers (False at once when HF_HUB_OFFLINE is set)."""
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0"):
        return False
    try:
        with socket.create_connection(HUB, timeout=timeout):
            return True
    except OSError:
        return False


def cached_folder(source: str, revision: str) -> Path | None:
    """The local Hugging Face cache's folder of ``source`` at ``revision``, or None when it is not cached."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(source, revision=revision, local_files_only=True))
    except Exception:  # noqa: BLE001 - any failure means "not usable offline"
        return None


def _cached(source: str, revision: str) -> bool:
    return cached_folder(source, revision) is not None


def check_available(source: str, steps: Sequence[int], revision: str = REVISION) -> None:
    """Every checkpoint of ``source`` can be loaded here, or an :class:`ExternalModelUnavailable` that
    names the model, the checkpoints and what to do (:class:`MissingExtra` first, when the ``tl`` extra is
    not installed)."""
    check_extra()
    if is_local(source):
        missing = [str(checkpoint_folder(source, s, revision)) for s in steps
                   if not checkpoint_folder(source, s, revision).is_dir()]
        if missing:
            raise ExternalModelUnavailable(
                f"the local model {source} lacks checkpoint folders {', '.join(missing)}: each checkpoint is a "
                f"subfolder named {revision!r} holding a Hugging Face model and its tokenizer (or a "
                "tinylens export folder); add them or change the preset's steps")
        return
    absent = [revision.format(step=s) for s in steps if not _cached(source, revision.format(step=s))]
    if absent and not hub_reachable():
        shown = ", ".join(absent[:5]) + (f" and {len(absent) - 5} more" if len(absent) > 5 else "")
        raise ExternalModelUnavailable(
            f"model {source!r}: revisions {shown} are not in the local Hugging Face cache and the hub "
            f"({HUB[0]}) cannot be reached. Either pre-download them on a machine with internet "
            f"(`huggingface-cli download {source} --revision {absent[0]}`, per revision, then copy the cache "
            "~/.cache/huggingface here), or point the entry's `model` key (config: external_models) at a local copy: a folder with one "
            f"subfolder per checkpoint named {revision!r} (a Hugging Face model folder with its tokenizer)")


def fetch_revision(source: str, revision: str, folder: Path) -> Path:
    """Download hub model ``source`` at ``revision`` into ``folder`` (the files themselves, no cache), and
    return it. Other frameworks' weights (:data:`NOT_FETCHED`) are skipped."""
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(source, revision=revision, local_dir=folder, ignore_patterns=NOT_FETCHED))


def folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in Path(folder).rglob("*") if f.is_file() and not f.is_symlink())


def checkpoint_stream(source: str, steps: Sequence[int], revision: str, scratch: str | os.PathLike[str],
                      fetch: Callable[[str, str, Path], Path] = fetch_revision) -> Iterator[tuple[int, Path]]:
    """``(step, folder)`` for each checkpoint of hub model ``source``, in order, holding at most two fetched
    checkpoints on disk: while one is measured the next is fetched beside it (in a thread), and each folder
    is deleted as soon as the caller asks for the next. A revision already in the local Hugging Face cache
    is read from there and never deleted. ``scratch`` (emptied first, removed at the end, also when the
    caller stops early or fails): where the fetched checkpoints live.

    The trade-off: disk bounded by two checkpoints instead of the suite, but every run downloads every
    checkpoint again (nothing is cached), and a rerun after a failure starts the downloads over."""
    scratch = Path(scratch)
    if scratch.exists():
        shutil.rmtree(scratch)  # what a killed run left
    scratch.mkdir(parents=True)

    def get(step: int) -> tuple[Path, bool]:
        name = revision.format(step=step)
        cached = cached_folder(source, name)
        if cached is not None:
            return cached, False
        return fetch(source, name, scratch / name), True

    steps = list(steps)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fetch")
    pending = pool.submit(get, steps[0]) if steps else None
    try:
        for i, step in enumerate(steps):
            folder, fetched = pending.result()
            pending = pool.submit(get, steps[i + 1]) if i + 1 < len(steps) else None
            on_disk = sorted(p.name for p in scratch.iterdir())
            log.info("step %d: %s; %d fetched checkpoint folder(s) on disk (%s), %.1f MB", step,
                     "fetched" if fetched else f"read from the Hugging Face cache ({folder})", len(on_disk),
                     ", ".join(on_disk) or "none", folder_bytes(scratch) / 1e6)
            yield step, folder
            if fetched:
                shutil.rmtree(folder, ignore_errors=True)
    finally:
        if pending is not None:
            pending.cancel()
        pool.shutdown(wait=True)
        shutil.rmtree(scratch, ignore_errors=True)
