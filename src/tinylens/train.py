"""Training with periodic loss estimates, checkpoints, and exact resume (method.md §2).

A run works inside ``work_dir`` (``<model_dir>.partial``) and publishes into the
model directory only when it has finished, so a killed job never leaves a model
that looks complete. ``work_dir`` holds:

- ``resume.pt``: weights, optimizer, phase, every RNG state and the loss
  history at the last checkpoint step (tensors and plain containers only, so
  it loads with ``torch.load(weights_only=True)``);
- ``checkpoints/step_NNNNNN.safetensors``: weights at each checkpoint step,
  for the training-dynamics analyses;
- ``loss.csv``: the loss estimates so far (rewritten atomically, safe to tail).

Rerunning :func:`train` on the same ``work_dir`` resumes from ``resume.pt``;
on CPU with the same thread count the final weights are bit-identical to an
uninterrupted run, because the batch sampler, the evaluation sampler and
dropout each draw from a generator whose state is checkpointed. (Another
thread count changes the order of floating-point sums, so the weights then
differ in the last bits.)

Two settings choose how closely a run follows the original code (method.md §12), which the
``paper`` preset does:

- ``precision``: ``mixed`` (bf16 autocast and TF32 matrix multiplies on CUDA; plain float32 on
  the CPU) or ``float32`` (float32 everywhere, as the original trained).
- ``batch_sampling``: ``separate`` (the training batches and each split's loss estimate draw from
  generators of their own, so evaluating never shifts the training batches) or ``original`` (one
  global generator for the initialisation, dropout, the batches and the estimates, and window
  starts from ``randint(len(data) - block_size)``, as the original ``get_batch``; ``separate``
  never draws the very last window).

``resume.pt`` also holds the run's fingerprint (:func:`run_fingerprint`):
the model shape, every training setting, the device type, the CPU thread
count, the compile mode and the sha256 of the train and validation token
ids. A resume whose fingerprint differs is refused, naming what changed,
since it would produce a model that no configuration describes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import shutil
import sys
import time
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from tinylens.atomic import atomic_path, replace_dir, write_json
from tinylens.core.schemas import LOSS_SCHEMA
from tinylens.core.training_log import LOSS_COLUMNS
from tinylens.model import ModelConfig, Transformer
from tinylens.tables import write_csv
from tinylens.train_config import BATCH_SAMPLINGS, PRECISIONS, Phase, TrainConfig
from tinylens.weights import checkpoint_path, save_model, save_weights

log = logging.getLogger(__name__)

RESUME_FILE = "resume.pt"


@dataclass
class TrainResult:
    model: Transformer
    metrics: dict
    history: list[dict] = field(default_factory=list)


def autocast_dtype(device: torch.device, precision: str = "mixed") -> torch.dtype | None:
    """The autocast dtype of training on ``device`` at ``precision`` (:data:`PRECISIONS`): bf16 on CUDA
    at ``mixed`` (fused attention kernels need it to be fast), else None (plain float32)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    return torch.bfloat16 if device.type == "cuda" and precision == "mixed" else None


def autocast_for(device: torch.device, precision: str = "mixed"):
    """The autocast context of a forward pass (:func:`autocast_dtype`; none for float32)."""
    dtype = autocast_dtype(device, precision)
    return torch.autocast(device_type=device.type, dtype=dtype) if dtype is not None else nullcontext()


@contextmanager
def matmul_precision(device: torch.device, precision: str):
    """TF32 matrix multiplies (and convolutions) on CUDA at ``mixed``, off at ``float32``; the previous
    settings are restored on exit. Nothing to set on the CPU."""
    if device.type != "cuda":
        yield
        return
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    allow = autocast_dtype(device, precision) is not None
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = allow
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


class BatchSampler:
    """Random contiguous windows of ``block_size + 1`` tokens.

    ``sampling="separate"``: from a generator of its own, seeded with ``seed``; ``"original"``: from
    torch's global generator (``seed`` unused), with starts from ``randint(len(ids) - block_size)``
    as the original code's ``get_batch``.
    """

    def __init__(self, ids: np.ndarray, block_size: int, batch_size: int, seed: int, device: torch.device,
                 sampling: str = "separate"):
        if sampling not in BATCH_SAMPLINGS:
            raise ValueError(f"batch_sampling must be one of {BATCH_SAMPLINGS}, got {sampling!r}")
        if len(ids) <= block_size + 1:
            raise ValueError(f"{len(ids)} tokens are too few for block_size {block_size}")
        # The tokens live on the device (a few MB) and the windows are gathered there; the start
        # positions come from a CPU generator, so every device draws the same batches.
        self.data = torch.from_numpy(np.asarray(ids, dtype=np.int64)).to(device)
        self.block_size, self.batch_size, self.device = block_size, batch_size, device
        original = sampling == "original"
        self.generator = None if original else torch.Generator().manual_seed(seed)
        # exclusive upper bound of a window start; the original's reaches the very last window
        self.high = len(self.data) - block_size - (0 if original else 1)
        self.window = torch.arange(block_size + 1, device=device)

    def sample(self) -> tuple[torch.Tensor, torch.Tensor]:
        """-> (x, y), each [batch pos]; y is x shifted by one token."""
        start = torch.randint(self.high, (self.batch_size,), generator=self.generator)
        chunk = self.data[start.to(self.device, non_blocking=True)[:, None] + self.window]  # [batch pos+1]
        return chunk[:, :-1], chunk[:, 1:]


@torch.no_grad()
def estimate_loss(model: torch.nn.Module, samplers: dict[str, BatchSampler], eval_iters: int,
                  device: torch.device, precision: str = "mixed") -> dict[str, float]:
    """Mean loss over ``eval_iters`` batches per split, in eval mode (dropout off).
    The losses stay on the device until the end (one synchronisation per split)."""
    model.eval()
    out = {}
    for split, sampler in samplers.items():
        losses = torch.zeros(eval_iters, device=device)
        for i in range(eval_iters):
            x, y = sampler.sample()
            with autocast_for(device, precision):
                _, loss = model(x, y)
            losses[i] = loss.detach()
        out[split] = losses.mean().item()
    model.train()
    return out


#: ``compile`` values of :func:`train`: a torch.compile mode, or ``eager`` (graph capture without code
#: generation: checks the compiled path cheaply, e.g. on a CPU in the tests).
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs", "eager")


def compiled(model: torch.nn.Module, mode: str | None) -> torch.nn.Module:
    """``model`` itself (``mode`` None), or a torch.compile'd wrapper sharing its parameters."""
    if mode is None:
        return model
    if mode not in COMPILE_MODES:
        raise ValueError(f"unknown compile mode {mode!r}; choose from {COMPILE_MODES}")
    return torch.compile(model, backend="eager") if mode == "eager" else torch.compile(model, mode=mode)


def _new_optimizer(model: Transformer, phase: Phase, cfg: TrainConfig, device: torch.device):
    return torch.optim.AdamW(model.parameters(), lr=phase.lr, weight_decay=cfg.weight_decay,
                             fused=device.type == "cuda")


def _write_loss_csv(path: Path, history: list[dict]) -> None:
    write_csv(path, LOSS_SCHEMA, {k: [row[k] for row in history] for k in LOSS_COLUMNS})


def run_fingerprint(model_cfg: ModelConfig, cfg: TrainConfig, train_ids: np.ndarray, val_ids: np.ndarray,
                    device: torch.device, compile: str | None = None) -> dict:
    """Everything that determines a training run's result, as plain JSON values.

    Down to the last bit: on a CPU the thread count orders the floating-point sums (another count gives
    weights that differ in the last bits), and ``torch.compile`` fuses kernels differently from eager mode.
    """
    def digest(ids: np.ndarray) -> str:
        return hashlib.sha256(np.ascontiguousarray(ids).tobytes()).hexdigest()

    return {
        "model": model_cfg.to_dict(),  # config.json's names: an interrupted run of an earlier version resumes
        "train": json.loads(json.dumps(asdict(cfg))),  # tuples -> lists, as they read back
        "device": device.type,
        "cpu_threads": torch.get_num_threads() if device.type == "cpu" else None,
        "compile": compile,
        "train_ids": {"tokens": int(len(train_ids)), "sha256": digest(train_ids)},
        "val_ids": {"tokens": int(len(val_ids)), "sha256": digest(val_ids)},
    }


def fingerprint_hash(fingerprint: dict) -> str:
    return hashlib.sha256(json.dumps(fingerprint, sort_keys=True).encode()).hexdigest()


def _differences(stored, current, prefix: str = "") -> list[str]:
    if isinstance(stored, dict) and isinstance(current, dict):
        out = []
        for key in sorted(set(stored) | set(current)):
            out += _differences(stored.get(key), current.get(key), f"{prefix}{key}.")
        return out
    if stored != current:
        return [f"{prefix.rstrip('.')}: the interrupted run had {stored!r}, this run asks for {current!r}"]
    return []


def check_resume_fingerprint(state: dict, fingerprint: dict, resume_path: Path) -> None:
    """Refuse to resume from a state written for other settings, naming what differs."""
    remedy = (f"Resuming would produce a model that no configuration describes. Delete {resume_path.parent} "
              "to train from scratch with the new settings, or restore the old settings to resume.")
    if "fingerprint" not in state:
        raise ValueError(f"resume state {resume_path} records no settings fingerprint (an older tinylens wrote "
                         f"it), so it cannot be checked. {remedy}")
    stored = json.loads(state["fingerprint"])
    fingerprint = json.loads(json.dumps(fingerprint, sort_keys=True))  # as stored, for a like-for-like message
    if fingerprint_hash(stored) != fingerprint_hash(fingerprint):
        differences = _differences(stored, fingerprint)
        if any(d.startswith("cpu_threads:") for d in differences):
            remedy += (" The thread count is the rule's `threads` (the preset's train.threads, capped by "
                       "--cores): rerun with the interrupted run's train.threads and --cores to resume bit-identically.")
        changes = "\n  ".join(differences)
        raise ValueError(f"resume state {resume_path} was written for other settings:\n  {changes}\n{remedy}")


def _rng_state(device: torch.device, samplers: dict[str, BatchSampler]) -> dict[str, torch.Tensor]:
    state = {f"sampler_{name}": s.generator.get_state() for name, s in samplers.items() if s.generator is not None}
    state["torch_cpu"] = torch.get_rng_state()
    if device.type == "cuda":
        state["torch_cuda"] = torch.cuda.get_rng_state(device)
    return state


def _set_rng_state(state: dict[str, torch.Tensor], device: torch.device, samplers: dict[str, BatchSampler]) -> None:
    for name, s in samplers.items():
        if s.generator is not None:
            s.generator.set_state(state[f"sampler_{name}"])
    torch.set_rng_state(state["torch_cpu"])
    if device.type == "cuda" and "torch_cuda" in state:
        torch.cuda.set_rng_state(state["torch_cuda"], device)


def _load_resume(path: Path) -> dict:
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises several types for a damaged file
        raise ValueError(
            f"resume state {path} is unreadable ({err}). It is only a cache of an interrupted "
            f"run: delete {path.parent} to train from scratch."
        ) from None


def train(
    model_cfg: ModelConfig,
    cfg: TrainConfig,
    train_ids: np.ndarray,
    val_ids: np.ndarray,
    work_dir: str | Path,
    device: torch.device | str = "cpu",
    progress: bool = True,
    compile: str | None = None,
    check_every: int = 50,
) -> TrainResult:
    """Train (or resume) a model in ``work_dir``; see the module docstring for what it holds.

    On CUDA the steps run in bf16 autocast with the fused attention kernel; ``compile``: a
    :data:`COMPILE_MODES` entry to run them through torch.compile (same parameters, same
    checkpoints). The loss is read back (a GPU synchronisation) every ``check_every`` steps only:
    for the progress bar and to stop on a non-finite loss.
    """
    device = torch.device(device)
    work_dir = Path(work_dir)
    (work_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    resume_path = work_dir / RESUME_FILE

    torch.manual_seed(cfg.seed)
    model = Transformer(model_cfg).to(device)
    step_model = compiled(model, compile)  # runs the steps; ``model`` holds the weights that are saved
    # "separate": generators of their own, all checkpointed, so evaluation never shifts the training
    # batches; "original": torch's global generator (checkpointed too), as the original code.
    train_batches = BatchSampler(train_ids, model_cfg.block_size, cfg.batch_size, cfg.seed, device,
                                 cfg.batch_sampling)
    eval_samplers = {
        "train": BatchSampler(train_ids, model_cfg.block_size, cfg.batch_size, cfg.seed + 1, device,
                              cfg.batch_sampling),
        "val": BatchSampler(val_ids, model_cfg.block_size, cfg.batch_size, cfg.seed + 2, device, cfg.batch_sampling),
    }
    all_samplers = {"train_batches": train_batches, **{f"eval_{k}": v for k, v in eval_samplers.items()}}
    tokens_per_step = cfg.batch_size * model_cfg.block_size

    start, phase_index, optimizer = 0, -1, None
    history: list[dict] = []
    seconds_before = 0.0  # training time spent by earlier, interrupted attempts
    fingerprint = run_fingerprint(model_cfg, cfg, train_ids, val_ids, device, compile)
    resumed = resume_path.exists()
    if resumed:
        state = _load_resume(resume_path)
        check_resume_fingerprint(state, fingerprint, resume_path)
        model.load_state_dict(state["model"])
        start, phase_index = int(state["step"]), int(state["phase"])
        if phase_index >= 0:
            optimizer = _new_optimizer(model, cfg.phases[phase_index], cfg, device)
            optimizer.load_state_dict(state["optimizer"])
        _set_rng_state(state["rng"], device, all_samplers)
        history, seconds_before = list(state["history"]), float(state["train_seconds"])
        log.info("resuming %s from step %d of %d", work_dir, start, cfg.max_steps)
    else:
        log.info("training from scratch in %s: %d steps, %d parameters, device %s, precision %s, batch sampling %s",
                 work_dir, cfg.max_steps, model.n_params(), device, cfg.precision, cfg.batch_sampling)

    session_start = time.perf_counter()

    def seconds_so_far() -> float:
        return seconds_before + time.perf_counter() - session_start

    with matmul_precision(device, cfg.precision):  # TF32 on CUDA only at mixed precision
        model.train()
        bar = tqdm(total=cfg.max_steps, initial=start, disable=not progress, unit="step", dynamic_ncols=True,
                   mininterval=0.5 if sys.stderr.isatty() else 10.0, file=sys.stderr)
        for step in range(start, cfg.max_steps + 1):
            # A resumed run already evaluated and checkpointed its first step.
            if not (resumed and step == start):
                if step % cfg.eval_interval == 0 or step == cfg.max_steps:
                    losses = estimate_loss(step_model, eval_samplers, cfg.eval_iters, device, cfg.precision)
                    if not all(map(math.isfinite, losses.values())):
                        raise FloatingPointError(f"loss estimate {losses} at step {step} is not finite; "
                                                 "lower the learning rate")
                    history.append({
                        "step": step, "train_loss": round(losses["train"], 6), "val_loss": round(losses["val"], 6),
                        "lr": cfg.phases[cfg.phase_at(min(step, cfg.max_steps - 1))].lr,
                        "tokens_seen": step * tokens_per_step, "elapsed_s": round(seconds_so_far(), 2),
                    })
                    _write_loss_csv(work_dir / "loss.csv", history)
                    log.info("step %d: train loss %.4f, val loss %.4f", step, losses["train"], losses["val"])
                if step in cfg.save_steps:
                    save_weights(checkpoint_path(work_dir, step), model)
                    with atomic_path(resume_path) as tmp:
                        torch.save({
                            "step": step, "phase": phase_index, "seed": cfg.seed,
                            "model_config": model_cfg.to_dict(),
                            "fingerprint": json.dumps(fingerprint, sort_keys=True),
                            "fingerprint_sha256": fingerprint_hash(fingerprint),
                            "model": model.state_dict(),
                            "optimizer": optimizer.state_dict() if optimizer is not None else {},
                            "rng": _rng_state(device, all_samplers),
                            "history": history, "train_seconds": seconds_so_far(),
                        }, tmp)
            if step == cfg.max_steps:
                break
            if cfg.phase_at(step) != phase_index:
                phase_index = cfg.phase_at(step)
                optimizer = _new_optimizer(model, cfg.phases[phase_index], cfg, device)
                log.info("step %d: fresh AdamW at lr %g", step, cfg.phases[phase_index].lr)
            x, y = train_batches.sample()
            with autocast_for(device, cfg.precision):
                _, loss = step_model(x, y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if (step + 1) % check_every == 0 or step + 1 == cfg.max_steps:  # .item() synchronises the GPU
                loss_value = loss.item()
                if not math.isfinite(loss_value):
                    raise FloatingPointError(
                        f"training loss became {loss_value} at step {step + 1}; lower the learning rate")
                rate = tokens_per_step * (step + 1 - start) / (time.perf_counter() - session_start)
                bar.set_postfix(loss=f"{loss_value:.3f}", tok_s=f"{rate:,.0f}", refresh=False)
            bar.update(1)
        bar.close()

    final = history[-1]
    train_seconds = seconds_so_far()
    metrics = {
        "seed": cfg.seed,
        "steps": cfg.max_steps,
        "train_loss": final["train_loss"],
        "val_loss": final["val_loss"],
        "n_params": model.n_params(),
        "tokens_seen": cfg.max_steps * tokens_per_step,
        "train_seconds": round(train_seconds, 2),
        "tokens_per_second": round((cfg.max_steps - start) * tokens_per_step / max(time.perf_counter() - session_start, 1e-9), 1),
        "device": device.type,
        "autocast_dtype": str(autocast_dtype(device, cfg.precision) or torch.float32).removeprefix("torch."),
        "compile": compile or "none",
        "torch_version": torch.__version__,
    }
    return TrainResult(model=model, metrics=metrics, history=history)


def publish(result: TrainResult, work_dir: str | Path, model_dir: str | Path, tokenizer_path: str | Path) -> None:
    """Move a finished run from ``work_dir`` into ``model_dir``, then drop ``work_dir``.

    ``model_dir`` receives ``model.safetensors``, ``config.json``,
    ``tokenizer.json``, ``metrics.json``, ``loss.csv`` and ``checkpoints/``.
    Each file is written atomically and ``work_dir`` (with the resume state)
    is removed last, so an interruption here is recovered by simply rerunning.
    """
    work_dir, model_dir = Path(work_dir), Path(model_dir)
    model_dir.mkdir(parents=True, exist_ok=True)
    shutil.copytree(work_dir / "checkpoints", work_dir / "checkpoints.publish", dirs_exist_ok=True)
    replace_dir(work_dir / "checkpoints.publish", model_dir / "checkpoints")
    save_model(model_dir, result.model)
    with atomic_path(model_dir / "tokenizer.json") as tmp:
        shutil.copyfile(tokenizer_path, tmp)
    _write_loss_csv(model_dir / "loss.csv", result.history)
    write_json(model_dir / "metrics.json", result.metrics)
    shutil.rmtree(work_dir)


