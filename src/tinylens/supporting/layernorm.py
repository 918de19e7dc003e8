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
import torch
from torch import Tensor

from tinylens.interventions import hook_name, run, run_in_batches, scale
from tinylens.measures import cosine, hellinger, softmax
from tinylens.model import Transformer
from tinylens.supporting.schemas import NOISE_SCHEMA, SCALING_SCHEMA


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
    base = run_in_batches(model, tokens, record=["ln_f_input", "ln_f_output"], last_only=True)
    x, y = base["ln_f_input"], base["ln_f_output"]
    q = softmax(base.logits)
    cols: dict[str, list] = {k: [] for k in SCALING_SCHEMA.columns if k not in ("mode", "prompt_id")}
    for c in factors:
        scaled = run_in_batches(model, tokens, edits=scale(last, c), record=["ln_f_output"], last_only=True)
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
    base = run_in_batches(model, tokens, record=["ln_f_input", "ln_f_output"], last_only=True)
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
