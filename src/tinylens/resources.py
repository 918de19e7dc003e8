"""What a job declares it needs (a rule's ``resources: mem_mb, runtime``), from its inputs and the preset.

Snakemake evaluates a rule's resources before its job runs. A resource given as a callable of the
job's ``wildcards`` and ``input`` can read the size of an input an earlier job made: the rows of a
Parquet table (from its footer), the bytes of a file, the vocabulary of the trained model (its
``config.json``). An input not made yet raises FileNotFoundError, which Snakemake reads as "to be
determined" (``<TBD>`` in a dry run) until the job that makes it has run.

The coefficients are fitted to the peaks of the test, small and paper_short presets' benchmark records
(docs/benchmarks.md) with room to spare; each says what it counts. Memory in MB (2**20 bytes), time in
minutes.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

MB = 2**20

#: Bytes per string of the string table in memory (next-token counts of both modes, CSR, the strings).
STRING_BYTES = 1900
#: Bytes per string and activation value: a block read, its unit-vector copy, float64 chunks.
STRING_VALUE_BYTES = 16

Resource = Callable[..., int]


def _exists(path: str | os.PathLike[str]) -> Path:
    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, "not made yet", str(path))
    return Path(path)


def table_rows(path: str | os.PathLike[str] | Iterable) -> int:
    """Rows of a Parquet table from its footer, summed over a list of tables (the prompts of every mode)."""
    import pyarrow.parquet as pq

    if not isinstance(path, (str, os.PathLike)):
        return sum(table_rows(p) for p in path)
    return pq.read_metadata(_exists(path)).num_rows


def vocab_size(config_path: str | os.PathLike[str]) -> int:
    """The vocabulary of a trained model, from its ``config.json``."""
    return int(json.loads(_exists(config_path).read_text(encoding="utf-8"))["vocab_size"])


def width_factor(d_model: int) -> float:
    """How the time per row of a forward pass grows with the model's width: flat to d_model 64 (the
    overheads dominate there), linear above."""
    return max(1.0, d_model / 64)


def per_row(table: str | Sequence[str], base: float, row_bytes: float = 0.0, row_seconds: float = 0.0,
            vocab_bytes: float = 0.0) -> Resource:
    """A resource that grows with the rows of the input ``table`` (strings, prompts; a list of tables is
    summed, and so are the rows of several named inputs, ``table`` a list of names): ``runtime`` = ``base``
    minutes plus ``row_seconds`` per row when ``row_seconds`` is given, else ``mem_mb`` = ``base`` MB plus
    ``row_bytes`` per row and ``vocab_bytes`` per row and vocabulary entry (the vocabulary from the input
    ``config``, the model's config.json)."""
    names = [table] if isinstance(table, str) else list(table)

    def resource(wildcards, input) -> int:
        rows = sum(table_rows(input[name]) for name in names)
        if row_seconds:
            return int(base + rows * row_seconds / 60)
        per = row_bytes + (vocab_bytes * vocab_size(input.config) if vocab_bytes else 0.0)
        return int(base + rows * per / MB)

    return resource


def per_input_byte(names: Sequence[str], base: float, factor: float) -> Resource:
    """``mem_mb`` = ``base`` plus ``factor`` bytes per byte of the inputs ``names`` (the token ids: one
    byte per token)."""

    def resource(wildcards, input) -> int:
        return int(base + factor * sum(os.path.getsize(_exists(input[name])) for name in names) / MB)

    return resource


def total(*resources: Resource) -> Resource:
    """The sum of several resources of one job (a table of strings and one of prompts)."""
    return lambda wildcards, input: sum(r(wildcards, input) for r in resources)


def dump_memory(kinds: Callable[[object], Sequence[str]], n_layer: int, d_model: int, length: int,
                batch_size: int) -> Resource:
    """An activation dump: 850 MB, the table and its token ids per row (1,900 + 4 d_model bytes), and one
    batch's activations of every kept kind (``kinds(wildcards)``) and block, gathered before they are
    written, with the forward pass's own tensors (about ten more of that size). At paper width the batch
    term dominates (1.5-2.1 GB measured for 20,000 prompts)."""

    def resource(wildcards, input) -> int:
        one_tensor = batch_size * length * d_model * 4
        batch_bytes = one_tensor * (len(kinds(wildcards)) * n_layer + 10)
        return int(850 + (table_rows(input.table) * (1900 + 4 * d_model) + batch_bytes) / MB)

    return resource


def forward_batch_mb(d_model: int, batch: int = 2048, length: int = 10) -> float:
    """One forward batch of the per-prompt rules (ablation, final LayerNorm, endpoint): at d_model 384
    (paper_short) the batch's activations and the allocator's slack came to about 45 d_model-wide float32
    vectors per position; 64 leaves a third of headroom."""
    return batch * length * 4 * 64 * d_model / MB


def prompt_row_bytes(d_model: int) -> float:
    """Per prompt row of the per-prompt rules: the tables, and the last-position values the endpoint keeps
    for every evaluation prompt of a mode (14 d_model-wide vectors: a sixth of them per row of all modes)."""
    return 2000 + 16 * d_model


def subspace_memory(samples: int, d_model: int) -> Resource:
    """The token subspaces: every token's samples, their gradients and AdamW's two moments (float32), the
    forward and backward activations through the rest of the model, and the model (1,132 MB measured at
    d_model 384, paper_short; 543 at 64); the vocabulary from the input ``config``."""

    def resource(wildcards, input) -> int:
        return 1000 + 48 * samples * vocab_size(input.config) * d_model * 4 // MB

    return resource


def attention_memory(model: Mapping[str, int], attention: Mapping) -> dict[str, int | Resource]:
    """The attention family's jobs (``model``: the preset's model entry, ``attention``: its attention entry):
    base MB (Python, torch, the model) plus MB per array copy, fitted to the test and small presets' peaks
    with a quarter or more to spare. The trajectories grow with the vocabulary (the input ``config``)."""
    depths, t, d, heads = model["n_layer"] + 1, model["block_size"], model["d_model"], model["n_head"]
    # one batch of 16 windows' attention patterns in float64, every block and head
    patterns = model["n_layer"] * 16 * heads * t**2 * 8 / MB
    # the tuned lens's training positions: residual streams at every depth, float32 (held twice while gathered)
    lens = depths * attention["lens_sequences"] * t * d * 4 / MB
    # per vocabulary entry: the validation positions' lens distributions at every depth, float64
    trajectories = depths * attention["sequences"] * t * 8 / MB
    # one batch of 256 passages' residual streams at every depth, float32, and one block's attention
    probes = 256 * t * (depths * d + heads * t) * 4 / MB
    return {
        "spectra": int(450 + 16 * patterns),
        "tuned_lens": int(550 + 4 * lens),
        "trajectories": lambda wildcards, input: int(450 + 24 * trajectories * vocab_size(input.config)),
        "probes": int(450 + 4 * probes),
    }
