"""Where a job runs: the device the configuration's ``device`` key names (``auto``, ``cuda`` or ``cpu``). Every
job takes its device from here through :meth:`tinylens.jobs.Job.device`; the training module only uses it.
"""

from __future__ import annotations

import torch


def select_device(requested: str = "auto") -> torch.device:
    """``auto``: CUDA when available, else CPU."""
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if requested == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' was requested but torch sees no CUDA device; use device: auto or cpu")
    return torch.device(requested)
