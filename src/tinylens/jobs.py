"""The prelude of every workflow script: its log, its threads, its device, its JSON.

Every script under ``scripts/`` starts the same way::

    with job(snakemake) as j:
        table = read_table(j.input.table, SCHEMA)
        j.write_json(j.output.summary, summarize(table, j.params.threshold))

:func:`job` sends the job's log lines, progress bars and any exception to the
rule's ``log:`` file (:func:`tinylens.logs.log_to`) and pins torch to the
rule's ``threads:``. Without that, torch takes every core of the machine while
Snakemake scheduled the job for one, and jobs running side by side
oversubscribe the cores. Scripts that never import torch do not pay for
importing it: the thread count is also put in the environment, where torch
reads it when it is imported later.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinylens import atomic
from tinylens.logs import log_to

#: What torch (OpenMP, MKL) reads at import for its number of threads.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def set_threads(threads: int) -> int:
    """Pin torch's intra-op threads to ``threads`` (at least 1), now if torch is imported, else when it is."""
    threads = max(1, int(threads))
    for name in THREAD_VARIABLES:
        os.environ[name] = str(threads)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(threads)
    return threads


@dataclass(frozen=True)
class Job:
    """One running job: the rule's files and params (as Snakemake gives them), its threads and its log."""

    input: Any
    output: Any
    params: Any
    wildcards: Any
    threads: int
    log: logging.Logger

    @property
    def device(self):
        """The torch device of the rule's ``device`` param (auto: CUDA when torch sees one, else the CPU)."""
        from tinylens.devices import select_device

        return select_device(self.params.device)

    @staticmethod
    def read_json(path: str | os.PathLike[str]) -> Any:
        """A JSON file, read as UTF-8 whatever the locale."""
        return atomic.read_json(path)

    def write_json(self, path: str | os.PathLike[str], obj: Any) -> None:
        """Write ``obj`` as UTF-8 JSON, atomically, and say where in the log."""
        atomic.write_json(path, obj)
        self.log.info("wrote %s", path)

    def save_figure(self, fig, path: str | os.PathLike[str] | None = None) -> None:
        """Write ``fig`` (a ``make_*`` function's Figure) as a PNG at ``path`` (the rule's output ``figure``
        by default), atomically (tinylens.plots.save_figure), and say where in the log."""
        from tinylens.plots import save_figure

        path = self.output.figure if path is None else path
        save_figure(fig, path)
        self.log.info("wrote %s", path)

    def wrote(self, *paths: str | os.PathLike[str]) -> None:
        """Say in the log which files the job wrote."""
        self.log.info("wrote %s", ", ".join(str(Path(p)) for p in paths))


@contextmanager
def job(smk) -> Iterator[Job]:
    """The prelude of a workflow script: ``smk`` is the ``snakemake`` object Snakemake hands it."""
    with log_to(smk.log[0]) as log:
        threads = set_threads(smk.threads)
        yield Job(input=smk.input, output=smk.output, params=smk.params, wildcards=smk.wildcards, threads=threads,
                  log=log)
