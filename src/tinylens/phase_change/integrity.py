"""Checkpoint suites a researcher can trust: every checkpoint's weights hashed as loaded, and the checkpoints
that repeat weights found by step (method.md §13).

Public suites are often corrupt: a step serving the same weights as the one before it, or an intermediate
step serving the final weights. Every analysis measures whatever it is given, so a duplicated checkpoint
draws a flat stretch, and final weights served early draw a "phase change" that never happened. The gate:

- :func:`weights_digest`: a SHA-256 of a model's tensors as loaded (names, dtypes, shapes and bytes, in
  name order), so two checkpoints holding the same weights have the same digest whatever their files;
- :func:`integrity_report`: from the digests in step order, which intermediate checkpoints hold the
  final checkpoint's weights, which repeat the checkpoint just before them, and which repeat an earlier
  one; the steps left out of phase and window detection (all of those, unless the user keeps them), and a
  warning per step. The final checkpoint and the first occurrence of any weights are never left out.

Torch is imported only by :func:`weights_digest`.

>>> report = integrity_report([0, 1, 2, 4, 8], ["a", "a", "b", "e", "e"])
>>> report["repeats_previous"], report["identical_to_final"], report["left_out"]
([{'step': 1, 'same_as': 0}], [{'step': 4, 'final_step': 8}], [1, 4])
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import Tensor

#: Digits of a digest shown in warnings and findings (the metrics keep all 64).
SHORT = 12


def weights_digest(state: Mapping[str, Tensor]) -> str:
    """SHA-256 (hex) of ``state`` (a state dict: name -> tensor) over every tensor's name, dtype, shape and
    bytes, in name order. Bit-identical weights give the same digest, whatever the file format they came in."""
    import torch

    h = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().to("cpu").contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def integrity_report(steps: Sequence[int], digests: Sequence[str], keep: bool = False) -> dict:
    """Which checkpoints repeat weights, by step (steps increasing, one digest each).

    - ``identical_to_final``: an intermediate checkpoint whose weights are the final checkpoint's;
    - ``repeats_previous``: one whose weights are the checkpoint's just before it (consecutive duplicates);
    - ``repeats_earlier``: one whose weights are an earlier, not adjacent, checkpoint's.

    ``left_out``: those steps, left out of phase and window detection unless ``keep`` (then empty);
    ``detection_steps``: the steps detection uses; ``warnings``: one sentence per flagged step."""
    steps, digests = [int(s) for s in steps], list(digests)
    if len(steps) != len(digests) or not steps:
        raise ValueError(f"integrity_report: {len(steps)} steps but {len(digests)} digests")
    if any(b <= a for a, b in zip(steps, steps[1:])):
        raise ValueError(f"integrity_report: steps must increase strictly, got {steps}")
    final, first_seen = digests[-1], {}
    to_final, previous, earlier, warnings = [], [], [], []
    for i, (step, digest) in enumerate(zip(steps[:-1], digests[:-1])):  # the final checkpoint is the reference
        if digest == final:
            to_final.append({"step": step, "final_step": steps[-1]})
            warnings.append(f"step {step} holds the final checkpoint's weights (step {steps[-1]})")
        elif i > 0 and digest == digests[i - 1]:
            previous.append({"step": step, "same_as": steps[i - 1]})
            warnings.append(f"step {step} holds the same weights as step {steps[i - 1]}, the checkpoint before it")
        elif digest in first_seen:
            earlier.append({"step": step, "same_as": first_seen[digest]})
            warnings.append(f"step {step} holds the same weights as the earlier step {first_seen[digest]}")
        first_seen.setdefault(digest, step)
    flagged = sorted(e["step"] for e in (*to_final, *previous, *earlier))
    left_out = [] if keep else flagged
    return {
        "checkpoints": len(steps),
        "distinct_weights": len(set(digests)),
        "identical_to_final": to_final,
        "repeats_previous": previous,
        "repeats_earlier": earlier,
        "flagged": flagged,
        "kept": bool(keep),
        "left_out": left_out,
        "detection_steps": [s for s in steps if s not in left_out],
        "warnings": warnings,
        "sha256": {str(s): d for s, d in zip(steps, digests)},
    }


def warning_text(report: dict, where: str) -> str | None:
    """One paragraph for the console and the log: what repeats, and what was done about it (None: nothing
    repeats). ``where``: the suite's name, as the user wrote it."""
    if not report["flagged"]:
        return None
    done = ("kept in phase and window detection (integrity.keep_duplicates is true): the curves may show flat "
            "stretches or a change that never happened" if report["kept"] else
            "left out of phase and window detection; set integrity.keep_duplicates: true to keep them")
    return (f"{where}: {len(report['flagged'])} of {report['checkpoints']} checkpoints repeat weights: "
            + "; ".join(report["warnings"]) + f". They are {done}.")
