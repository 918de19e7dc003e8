"""What this family's jobs read: prompt sets as token ids, and learned subspaces from disk."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import Tensor

from tinylens.core.corpus import CharTokenizer
from tinylens.core.strings import load_prompts
from tinylens.weights import save_tensors


def prompt_tokens(tokenizer: CharTokenizer, strings: Sequence[str]) -> Tensor:
    """Equal-length prompts as token ids ``[batch pos]`` (int64)."""
    if not strings:
        return torch.zeros((0, 0), dtype=torch.long)
    if len({len(s) for s in strings}) != 1:
        raise ValueError("prompts of one batch must have the same length")
    ids = tokenizer.encode("".join(strings)).reshape(len(strings), -1)
    return torch.from_numpy(ids.astype(np.int64))


@dataclass(frozen=True)
class PromptSet:
    mode: str
    prompt_id: np.ndarray  # [prompt] int
    split: np.ndarray  # [prompt] "tune" | "eval"
    strings: list[str]
    tokens: Tensor  # [prompt pos]


def load_prompt_set(path: str | Path, mode: str, tokenizer: CharTokenizer, split: str | None = None) -> PromptSet:
    """A prompt table as token ids; only the prompts of ``split`` when given."""
    table = load_prompts(path)
    keep = [i for i, s in enumerate(table["split"]) if split is None or s == split]
    strings = [table["string"][i] for i in keep]
    return PromptSet(mode=mode, prompt_id=np.asarray(table["prompt_id"], dtype=np.int32)[keep],
                     split=np.asarray(table["split"])[keep], strings=strings, tokens=prompt_tokens(tokenizer, strings))


def prompt_sets(paths: Sequence[str | Path], modes: Sequence[str], tokenizer: CharTokenizer,
                split: str | None = None) -> Iterator[PromptSet]:
    """Each mode's prompt table (``paths`` in the order of ``modes``) as a :class:`PromptSet`."""
    for mode, path in zip(modes, paths, strict=True):
        yield load_prompt_set(path, mode, tokenizer, split=split)


def extend_columns(columns: dict[str, list], more: Mapping[str, Sequence]) -> None:
    """Append one prompt set's columns to the columns gathered so far (every mode in one table)."""
    for key, values in more.items():
        columns.setdefault(key, []).extend(list(values))


#: Tensors of a subspace file (safetensors): see :func:`save_subspaces`.
SUBSPACE_TENSORS = ("samples", "direction", "median_norm", "singular", "singular_centred", "converged")


def save_subspaces(path: str | Path, stage: int, vocab: str, tensors: dict[str, np.ndarray | Tensor]) -> None:
    """``samples`` [token K d_model], ``direction`` [token d_model], ``median_norm`` [token], ``singular``,
    ``singular_centred`` [token min(K, d_model)], ``converged`` [token] (1 or 0); the stage and the vocabulary
    in the metadata."""
    missing = set(SUBSPACE_TENSORS) - set(tensors)
    if missing:
        raise ValueError(f"subspace tensors missing: {sorted(missing)}")
    data = {k: torch.as_tensor(np.asarray(tensors[k])).float().contiguous() for k in SUBSPACE_TENSORS}
    save_tensors(path, data, metadata={"stage": str(stage), "vocab": vocab})


def load_subspaces(path: str | Path, vocab_size: int, d_model: int) -> tuple[int, dict[str, np.ndarray]]:
    """``(stage, tensors)`` from a file of :func:`save_subspaces`, checked against the model's shape."""
    from safetensors import safe_open

    remedy = "rerun the token_subspaces rule (snakemake --forcerun token_subspaces) or `dvc pull`"
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"subspace file {path} is missing; {remedy}")
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
        tensors = {k: v.numpy() for k, v in load_file(str(path)).items()}
    except (SafetensorError, OSError) as err:
        raise ValueError(f"subspace file {path} is truncated or not safetensors ({err}); {remedy}") from None
    direction = tensors.get("direction")
    if set(tensors) != set(SUBSPACE_TENSORS) or "stage" not in metadata or direction is None \
            or direction.shape != (vocab_size, d_model):
        raise ValueError(f"subspace file {path} holds {sorted(tensors)} (direction "
                         f"{None if direction is None else direction.shape}), expected {list(SUBSPACE_TENSORS)} with "
                         f"direction [{vocab_size} {d_model}] and a stage in its metadata; {remedy}")
    return int(metadata["stage"]), tensors
