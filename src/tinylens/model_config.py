"""The model's shape (method.md §1) and its ``config.json``, without torch.

Jobs that only read a model's shape (figures and summaries sized by its layers and heads) import this
module instead of :mod:`tinylens.model`: importing torch costs 2-3 CPU-seconds, most of such a job.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path


@dataclass(frozen=True)
class ModelConfig:
    """Shape of the model. ``paper`` values are method.md §1."""

    vocab_size: int = 65
    block_size: int = 256
    n_embed: int = 384
    n_layer: int = 6
    n_head: int = 6
    dropout: float = 0.2

    def __post_init__(self) -> None:
        if self.n_embed % self.n_head:
            raise ValueError(
                f"n_embed ({self.n_embed}) must be divisible by n_head ({self.n_head})"
            )

    @property
    def d_head(self) -> int:
        return self.n_embed // self.n_head

    @classmethod
    def from_dict(cls, values: Mapping[str, object], source: str = "model config") -> ModelConfig:
        """Build from a mapping, naming the offending key when one is unknown or missing."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - names)
        missing = sorted(names - set(values))
        if unknown or missing:
            raise ValueError(
                f"{source}: unknown keys {unknown} / missing keys {missing}; "
                f"expected exactly {sorted(names)}"
            )
        return cls(**values)  # type: ignore[arg-type]


def load_config(path: str | Path) -> ModelConfig:
    """The :class:`ModelConfig` of a ``config.json``, saying what to do when it is missing or not JSON."""
    try:
        values = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(
            f"model config {path} is missing: it is written beside model.safetensors "
            "by the train rule; rerun it or `dvc pull` the model"
        ) from None
    except json.JSONDecodeError as err:
        raise ValueError(f"model config {path} is not valid JSON ({err})") from None
    return ModelConfig.from_dict(values, source=str(path))
