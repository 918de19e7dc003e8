"""Model weights on disk: ``model.safetensors`` with ``config.json`` beside it.

No pickle: safetensors for tensors, JSON for the shape. Loading checks the
file is complete and every tensor has the shape the config implies, and says
what to do when it is not.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save

from tinylens.atomic import atomic_path, write_json
from tinylens.model import ModelConfig, Transformer
from tinylens.model_config import CHECKPOINT_DIR, CONFIG_FILE, WEIGHTS_FILE, load_config

_REMEDY = "rerun the train rule (snakemake --forcerun train_model) or restore it with `dvc pull`"


def state_dict_for_saving(model: Transformer) -> dict[str, torch.Tensor]:
    """Contiguous CPU copies, as safetensors requires; a tied weight once, under the key it is owned by
    (:meth:`Transformer.tied_weights`: safetensors refuses two names for one tensor)."""
    tied = model.tied_weights()
    return {k: v.detach().to("cpu").contiguous() for k, v in model.state_dict().items() if k not in tied}


def canonical_safetensors(tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None) -> bytes:
    """The bytes of a safetensors file, the same for the same tensors and metadata in every process.

    The safetensors serializer keeps the metadata in a hash map, so with two or more keys their
    order in the header changes from one process to the next (and with it the file's hash, which
    DVC would report as a change). The header is rewritten with the metadata keys sorted,
    compact JSON and the space padding to 8 bytes the format uses; the tensor data is untouched.
    """
    raw = save(tensors, metadata=metadata)
    length = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + length])
    if "__metadata__" in header:
        header["__metadata__"] = dict(sorted(header["__metadata__"].items()))
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + raw[8 + length:]


def save_tensors(path: str | Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None) -> None:
    """Contiguous CPU tensors as safetensors, atomically and byte-identical from run to run
    (:func:`canonical_safetensors`); every safetensors file of the workflow is written by this."""
    data = canonical_safetensors(tensors, metadata)
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def save_weights(path: str | Path, model: Transformer, metadata: dict[str, str] | None = None) -> None:
    save_tensors(path, state_dict_for_saving(model), metadata)


def save_config(path: str | Path, config: ModelConfig) -> None:
    """A model's shape as JSON (``config.json``, :meth:`ModelConfig.to_dict`), atomically."""
    write_json(path, config.to_dict())


def save_model(directory: str | Path, model: Transformer) -> None:
    """Write ``model.safetensors`` and ``config.json`` into ``directory``."""
    directory = Path(directory)
    save_weights(directory / WEIGHTS_FILE, model)
    save_config(directory / CONFIG_FILE, model.config)


def load_state(path: str | Path) -> dict[str, torch.Tensor]:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"weights file {path} is missing; {_REMEDY}")
    try:
        return load_file(str(path))
    except (SafetensorError, OSError) as err:
        raise ValueError(
            f"weights file {path} is truncated or not a safetensors file ({err}); {_REMEDY}"
        ) from None


def load_weights(model: Transformer, path: str | Path) -> Transformer:
    """Load ``path`` into ``model`` after checking names and shapes match exactly."""
    state = load_state(path)
    tied = model.tied_weights()
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items() if k not in tied}
    found = {k: tuple(v.shape) for k, v in state.items()}
    problems = [f"missing {k} {s}" for k, s in expected.items() if k not in found]
    problems += [f"unexpected {k} {s}" for k, s in found.items() if k not in expected]
    problems += [
        f"{k}: file has {found[k]}, config implies {s}"
        for k, s in expected.items()
        if k in found and found[k] != s
    ]
    if problems:
        shown = "; ".join(problems[:6]) + (f"; ... ({len(problems)} in all)" if len(problems) > 6 else "")
        raise ValueError(
            f"weights file {path} does not fit its model config {model.config}: {shown}. "
            f"Is the config.json beside it from another run? {_REMEDY}"
        )
    model.load_state_dict({**state, **{alias: state[owner] for alias, owner in tied.items()}})
    return model


def load_model(directory: str | Path, device: str | torch.device = "cpu") -> Transformer:
    """Rebuild the model from ``config.json`` and ``model.safetensors`` in ``directory``, in eval mode."""
    directory = Path(directory)
    model = Transformer(load_config(directory / CONFIG_FILE))
    load_weights(model, directory / WEIGHTS_FILE)
    return model.to(device).eval()


# --- checkpoints: the weights saved during training (read by the training-dynamics and
# weight-only families; written by tinylens.train) ----------------------------------------------

def checkpoint_path(model_dir: str | Path, step: int) -> Path:
    """``<model_dir>/checkpoints/step_NNNNNN.safetensors``: where the weights at ``step`` live."""
    return Path(model_dir) / CHECKPOINT_DIR / f"step_{step:06d}.safetensors"


def checkpoint_steps(model_dir: str | Path) -> list[int]:
    """The steps whose checkpoints ``model_dir`` holds, in increasing order."""
    directory = Path(model_dir) / CHECKPOINT_DIR
    if not directory.is_dir():
        raise FileNotFoundError(f"checkpoint directory {directory} is missing; {_REMEDY}")
    steps = []
    for path in directory.glob("step_*.safetensors"):
        number = path.stem.removeprefix("step_")
        if not number.isdigit():
            raise ValueError(f"{path} is not named step_NNNNNN.safetensors; remove it or {_REMEDY}")
        steps.append(int(number))
    if not steps:
        raise FileNotFoundError(f"checkpoint directory {directory} holds no step_*.safetensors; {_REMEDY}")
    return sorted(steps)


def load_checkpoint(model_dir: str | Path, step: int, device: str | torch.device = "cpu") -> Transformer:
    """The model of ``model_dir`` (its ``config.json``) with the weights saved at ``step``, in eval mode."""
    model = Transformer(load_config(Path(model_dir) / CONFIG_FILE))
    load_weights(model, checkpoint_path(model_dir, step))
    return model.to(device).eval()
