"""Where an external model's checkpoints are, and whether they can be loaded here (method.md §13).

Torch-free: the workflow asks it while it plans (rules/external.smk), so a model that cannot be
loaded stops the run before any job starts. A *source* is a Hugging Face hub name whose checkpoints
are revisions (``EleutherAI/pythia-70m`` at ``step1000``), or a local folder with one subfolder per
checkpoint (``<folder>/step1000/``). Loading is :func:`tinylens.external.load_bridge`.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from pathlib import Path

#: The key of an external model in the tables and metrics of our seeds (their scripts read them unchanged).
EXTERNAL_SEED = 0
#: The revision (and local subfolder) of a checkpoint by default: Pythia's names.
REVISION = "step{step}"
HUB = ("huggingface.co", 443)


class ExternalModelUnavailable(RuntimeError):
    """A model or checkpoint that cannot be loaded here; the message says what to do."""


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


def _cached(source: str, revision: str) -> bool:
    from huggingface_hub import snapshot_download

    try:
        snapshot_download(source, revision=revision, local_files_only=True)
        return True
    except Exception:  # noqa: BLE001 - any failure means "not usable offline"
        return False


def check_available(source: str, steps: Sequence[int], revision: str = REVISION) -> None:
    """Every checkpoint of ``source`` can be loaded here, or an :class:`ExternalModelUnavailable` that
    names the model, the checkpoints and what to do."""
    if is_local(source):
        missing = [str(checkpoint_folder(source, s, revision)) for s in steps
                   if not checkpoint_folder(source, s, revision).is_dir()]
        if missing:
            raise ExternalModelUnavailable(
                f"the local model {source} lacks checkpoint folders {', '.join(missing)}: each checkpoint is a "
                f"subfolder named {revision!r} holding a Hugging Face model and its tokenizer (or a "
                "tinylens-export-tl folder); add them or change the preset's steps")
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
