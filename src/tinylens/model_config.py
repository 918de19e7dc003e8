"""What names a model without torch: its shape (method.md §1) and ``config.json``, the files of its
folder, the names of its activations.

Jobs that only read a model's shape (figures and summaries sized by its layers and heads), and the
Snakefile, which every Snakemake invocation parses, import this module instead of :mod:`tinylens.model`:
importing torch costs 2-3 CPU-seconds.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path

WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
CHECKPOINT_DIR = "checkpoints"
#: Every file of a trained model's folder (tinylens.train.publish writes them), by the name rules use.
MODEL_FILES = {"weights": WEIGHTS_FILE, "config": CONFIG_FILE, "tokenizer": "tokenizer.json",
               "metrics": "metrics.json", "loss": "loss.csv", "checkpoints": CHECKPOINT_DIR}

#: The activations the analyses keep, one stable name each, used unchanged as Parquet column and file
#: names: ``block_input`` the residual stream entering a block, ``sa_out`` the attention output added to
#: it, ``ffwd_out`` the feed-forward output added after that, ``attn_pattern`` the attention weights.
ACTIVATION_KINDS = ("block_input", "sa_out", "ffwd_out", "attn_pattern")
#: Those of them that are d_model-wide vectors (what activation dumps hold).
VECTOR_KINDS = ACTIVATION_KINDS[:3]

#: Fields ``config.json`` names otherwise: the residual width was ``n_embed`` when the first models were
#: written, and the records of a model keep that name (its ``config.json``, the train job's params, the resume
#: fingerprint, the comparison table's wording), so that every model written before loads, no model is
#: retrained for the rename and every output is byte-identical. Everywhere else it is ``d_model``.
FILE_NAMES = {"d_model": "n_embed"}


#: The normalisation layers a model can use (method.md §1; §14 for the variant): LayerNorm (centre, divide by the
#: standard deviation, gain and bias), as the paper's model, or RMSNorm (divide by the root mean square, gain only).
NORMS = ("layernorm", "rmsnorm")
#: The options of a variant model and their defaults, the paper's model (method.md §14): ``config.json`` names an
#: option only where a model differs from its default, so every model written before keeps its exact file.
VARIANT_DEFAULTS = {"tie_embeddings": False, "norm": "layernorm"}
#: The variant models a preset may train (``variants.models``), each the original with one option changed.
VARIANT_OPTIONS = {"tied": {"tie_embeddings": True}, "rmsnorm": {"norm": "rmsnorm"}}


@dataclass(frozen=True)
class ModelConfig:
    """Shape of the model. ``paper`` values are method.md §1. ``tie_embeddings``: the unembedding ``lm_head``
    shares its weight with the token embedding (its bias stays its own); ``norm``: one of :data:`NORMS` for
    ``ln1``, ``ln2`` and ``ln_f`` (method.md §14)."""

    vocab_size: int = 65
    block_size: int = 256
    d_model: int = 384
    n_layer: int = 6
    n_head: int = 6
    dropout: float = 0.2
    tie_embeddings: bool = False
    norm: str = "layernorm"

    def __post_init__(self) -> None:
        if self.d_model % self.n_head:
            raise ValueError(
                f"d_model ({self.d_model}) must be divisible by n_head ({self.n_head})"
            )
        if self.norm not in NORMS:
            raise ValueError(f"norm must be one of {NORMS}, not {self.norm!r}")
        if not isinstance(self.tie_embeddings, bool):
            raise ValueError(f"tie_embeddings must be true or false, not {self.tie_embeddings!r}")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_head

    def to_dict(self) -> dict[str, object]:
        """The fields as ``config.json`` writes them (:data:`FILE_NAMES`), in their order; a variant option
        (:data:`VARIANT_DEFAULTS`) only where it differs from its default."""
        return file_form({k: v for k, v in asdict(self).items()
                          if k not in VARIANT_DEFAULTS or v != VARIANT_DEFAULTS[k]})

    @classmethod
    def from_dict(cls, values: Mapping[str, object], source: str = "model config") -> ModelConfig:
        """Build from a mapping as ``config.json`` holds it (:meth:`to_dict`), naming the offending key when one
        is unknown or missing."""
        names = {FILE_NAMES.get(f.name, f.name) for f in fields(cls)}
        unknown = sorted(set(values) - names)
        missing = sorted(names - set(values) - set(VARIANT_DEFAULTS))  # an option left out is its default
        if unknown or missing:
            raise ValueError(
                f"{source}: unknown keys {unknown} / missing keys {missing}; "
                f"expected exactly {sorted(names - set(VARIANT_DEFAULTS))}, and optionally {sorted(VARIANT_DEFAULTS)}"
            )
        field_names = {file: name for name, file in FILE_NAMES.items()}
        return cls(**{field_names.get(k, k): v for k, v in values.items()})  # type: ignore[arg-type]


def file_form(model: Mapping[str, object]) -> dict[str, object]:
    """A model's shape (fields of :class:`ModelConfig`, some or all, as a preset's ``model`` entry names them)
    under the names ``config.json`` gives them (:data:`FILE_NAMES`), in the same order."""
    return {FILE_NAMES.get(k, k): v for k, v in model.items()}


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
