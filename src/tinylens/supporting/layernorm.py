"""The final LayerNorm ignores the scale of its input (appendix III).

``ln_f(c x) = ln_f(x)`` for ``c > 0`` up to the ``eps`` term: with ``mu`` and
``var`` the mean and (biased) variance of ``x`` over ``d_model``,
``ln_f(c x) = g (x - mu) / sqrt(var + eps / c**2) + beta``. :func:`scaling_deviation`
scales the last block's output through the intervention API and reports the
measured change beside the change that ``eps`` alone predicts, so what is left
is float rounding.

:func:`noise_experiment` is the appendix's second check, on every prompt
instead of one vector: a random perturbation of the final residual at a few
sizes, and how the post-LayerNorm norm (and the distribution) move with the
cosine between the clean and the perturbed input.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import torch
from torch import Tensor

from tinylens.interventions import hook_name, run, scale
from tinylens.measures import cosine, hellinger, softmax
from tinylens.model import Transformer
from tinylens.tables import Schema

SCALING_SCHEMA = Schema("final LayerNorm scaling", {
    "mode": pa.string(),
    "prompt_id": pa.int32(),
    "factor": pa.float64(),  # c: the last block's output is multiplied by it
    "output_norm": pa.float64(),  # |ln_f(x)| of the unmodified model
    "output_norm_scaled": pa.float64(),  # |ln_f(c x)|
    "max_abs_deviation": pa.float64(),  # max_i |ln_f(c x)_i - ln_f(x)_i|
    "eps_predicted_deviation": pa.float64(),  # the same, predicted from the eps term alone (float64)
    "residual_deviation": pa.float64(),  # max_i |measured - eps-predicted ln_f(c x)_i|: float rounding
    "hellinger": pa.float64(),  # H(distribution after scaling, unmodified)
})

NOISE_SCHEMA = Schema("final LayerNorm noise", {
    "mode": pa.string(),
    "prompt_id": pa.int32(),
    "noise_level": pa.float64(),  # |noise| / |x|
    "input_cosine": pa.float64(),  # cos(x, x + noise)
    "input_norm_ratio": pa.float64(),  # |x + noise| / |x|
    "output_norm_ratio": pa.float64(),  # |ln_f(x + noise)| / |ln_f(x)|
    "output_cosine": pa.float64(),  # cos(ln_f(x), ln_f(x + noise))
    "hellinger": pa.float64(),  # H(distribution from x + noise, from x)
})


def layernorm_float64(ln: torch.nn.LayerNorm, x: Tensor, eps: float | None = None) -> Tensor:
    """``ln(x)`` computed in float64 (with another ``eps`` if given): the exact reference."""
    x = x.double()
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    e = ln.eps if eps is None else eps
    return (x - mu) / torch.sqrt(var + e) * ln.weight.double() + ln.bias.double()


@torch.no_grad()
def scaling_deviation(model: Transformer, tokens: Tensor, factors: Sequence[float]) -> dict[str, np.ndarray]:
    """Scale the last block's output by each factor; columns of :data:`SCALING_SCHEMA` (less mode and
    prompt_id), one row per (factor, prompt), factors outermost."""
    model.eval()
    last = hook_name(model.config.n_layer - 1, "block_output")
    base = run(model, tokens, record=["ln_f_input", "ln_f_output"], last_only=True)
    x, y = base["ln_f_input"], base["ln_f_output"]
    q = softmax(base.logits)
    cols: dict[str, list] = {k: [] for k in SCALING_SCHEMA.columns if k not in ("mode", "prompt_id")}
    for c in factors:
        scaled = run(model, tokens, edits=scale(last, c), record=["ln_f_output"], last_only=True)
        y_c = scaled["ln_f_output"]
        # ln_f(c x) = g (c x - c mu) / sqrt(c^2 var + eps) + beta = ln_f with eps / c^2, applied to x.
        predicted = layernorm_float64(model.ln_f, x, eps=model.ln_f.eps / c**2)
        cols["factor"].append(np.full(len(x), float(c)))
        cols["output_norm"].append(y.double().norm(dim=-1).numpy())
        cols["output_norm_scaled"].append(y_c.double().norm(dim=-1).numpy())
        cols["max_abs_deviation"].append((y_c.double() - y.double()).abs().amax(-1).numpy())
        cols["eps_predicted_deviation"].append(
            (predicted - layernorm_float64(model.ln_f, x)).abs().amax(-1).numpy())
        cols["residual_deviation"].append((y_c.double() - predicted).abs().amax(-1).numpy())
        cols["hellinger"].append(hellinger(softmax(scaled.logits), q).numpy())
    return {k: np.concatenate(v) for k, v in cols.items()}


@torch.no_grad()
def noise_experiment(model: Transformer, tokens: Tensor, levels: Sequence[float], seed: int) -> dict[str, np.ndarray]:
    """Perturb the final residual ``x`` by Gaussian noise of norm ``level * |x|``; columns of
    :data:`NOISE_SCHEMA` (less mode and prompt_id), one row per (level, prompt), levels outermost."""
    model.eval()
    n_layer = model.config.n_layer
    base = run(model, tokens, record=["ln_f_input", "ln_f_output"], last_only=True)
    x, y = base["ln_f_input"], base["ln_f_output"]
    q = softmax(base.logits)
    generator = torch.Generator().manual_seed(seed)
    cols: dict[str, list] = {k: [] for k in NOISE_SCHEMA.columns if k not in ("mode", "prompt_id")}
    for level in levels:
        noise = torch.randn(x.shape, generator=generator, dtype=x.dtype)
        noise = noise / noise.norm(dim=-1, keepdim=True) * x.norm(dim=-1, keepdim=True) * level
        noisy = x + noise
        trace = run(model, resid=noisy[:, None, :], start=n_layer, record=["ln_f_output"], last_only=True)
        y_n = trace["ln_f_output"]
        cols["noise_level"].append(np.full(len(x), float(level)))
        cols["input_cosine"].append(cosine(x, noisy).numpy())
        cols["input_norm_ratio"].append((noisy.double().norm(dim=-1) / x.double().norm(dim=-1)).numpy())
        cols["output_norm_ratio"].append((y_n.double().norm(dim=-1) / y.double().norm(dim=-1)).numpy())
        cols["output_cosine"].append(cosine(y, y_n).numpy())
        cols["hellinger"].append(hellinger(softmax(trace.logits), q).numpy())
    return {k: np.concatenate(v) for k, v in cols.items()}


def summarize_scaling(cols: dict[str, np.ndarray]) -> dict:
    """Per factor: the largest deviations over the prompts, and the mean output norms (the paper's check)."""
    out = {}
    for c in np.unique(cols["factor"]):
        sel = cols["factor"] == c
        out[f"{c:g}"] = {
            "n_prompts": int(sel.sum()),
            "max_norm_deviation": float(np.abs(cols["output_norm_scaled"][sel] - cols["output_norm"][sel]).max()),
            "max_abs_deviation": float(cols["max_abs_deviation"][sel].max()),
            "max_eps_predicted_deviation": float(cols["eps_predicted_deviation"][sel].max()),
            "max_residual_deviation": float(cols["residual_deviation"][sel].max()),
            "max_hellinger": float(cols["hellinger"][sel].max()),
            "mean_output_norm": round(float(cols["output_norm"][sel].mean()), 6),
            "mean_output_norm_scaled": round(float(cols["output_norm_scaled"][sel].mean()), 6),
        }
    return out


def summarize_noise(cols: dict[str, np.ndarray]) -> dict:
    """Per noise level: mean (and spread) of the input cosine, the post-LayerNorm norm ratio and H."""
    out = {}
    for level in np.unique(cols["noise_level"]):
        sel = cols["noise_level"] == level
        entry = {"n_prompts": int(sel.sum())}
        for k in ("input_cosine", "input_norm_ratio", "output_norm_ratio", "output_cosine", "hellinger"):
            v = cols[k][sel]
            entry[k] = {"mean": round(float(v.mean()), 6), "std": round(float(v.std()), 6),
                        "min": round(float(v.min()), 6), "max": round(float(v.max()), 6)}
        out[f"{level:g}"] = entry
    return out
