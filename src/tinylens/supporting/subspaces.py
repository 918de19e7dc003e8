"""Token subspaces (appendix V, as the public notebooks do it; method.md §7).

For a stage ``s`` (the residual stream entering block ``s``; ``s = n_layer`` is
the input of ``ln_f``) and a token ``t``: learn ``K`` vectors, each fed as a
one-position sequence directly as the residual stream at ``s`` (no position
embedding) through the rest of the model in eval mode, so that the model
predicts ``t``. Init ``N(0, 1)``; AdamW; stop when the mean negative
log-likelihood of ``t`` over the ``K`` samples (one joint test) is below the
target, when it fell by less than ``min_drop`` nats over the last ``window``
steps (the plateau rule), or after the step budget.

Every token of a stage is learned in one batch. The loss is the sum over
tokens of each token's mean NLL, so each vector gets exactly the gradient of
its own token's loss, and AdamW acts element-wise: the batch is the same
computation as learning each token on its own (a test checks this). A token
that passes its test leaves the batch (with its optimiser state), so the
batch shrinks as tokens finish.

The SVD of a token's ``K x d_model`` stack (uncentred, as the paper; the
centred one beside it) gives ``sigma_1 / sigma_2`` and the first right
singular vector ``v_t``, its sign flipped when more than half of the samples
have a negative cosine with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor
from tqdm.auto import tqdm

from tinylens.interventions import run
from tinylens.measures import softmax
from tinylens.model import Transformer


@dataclass(frozen=True)
class Learned:
    """What :func:`learn_token_vectors` returns; token axis = the ``tokens`` asked for."""

    samples: Tensor  # [token K d_model] float32, as they were when the token stopped
    stopped_step: np.ndarray  # [token] optimiser steps taken when the joint test passed; -1 if never
    plateau_step: np.ndarray  # [token] steps taken when its joint NLL stopped improving (plateau rule); -1 if never
    joint_nll: np.ndarray  # [token] mean NLL of the token over its K samples, at the end
    sample_nll: np.ndarray  # [token K] each sample's NLL, at the end
    steps: int  # the step budget
    history: np.ndarray  # [token step] joint NLL before each step (step 0: the initial vectors); NaN once stopped


def _token_logits(model: Transformer, start: int, vectors: Tensor) -> Tensor:
    """vectors ``[n d_model]`` as one-position residual streams at ``start`` -> logits ``[n vocab]``."""
    return run(model, resid=vectors[:, None, :], start=start, last_only=True).logits


def learn_token_vectors(model: Transformer, start: int, tokens: Sequence[int], samples: int, *, lr: float,
                        weight_decay: float, target_nll: float, max_steps: int, seed: int = 0,
                        plateau_window: int = 0, plateau_min_drop: float = 0.0,
                        init: Tensor | None = None, progress: bool = False) -> Learned:
    """Learn ``samples`` vectors per token at stage ``start`` (see the module docstring).

    The joint test is made before every step (step 0 tests the initial vectors); a token
    that has not passed it after ``max_steps`` steps keeps its last vectors. The plateau rule
    (``plateau_window > 0``): a token also stops, converged though short of the target, when its
    joint NLL fell by less than ``plateau_min_drop`` nats since ``plateau_window`` steps before
    (the target may lie beyond what the final LayerNorm lets one vector reach). The drop is in nats,
    not relative to the NLL: an NLL heading for 0 about as 1/step falls by about window / step of its
    value over a window, which a 1% tolerance passes only after 100 windows. ``init``
    ``[token K d_model]`` replaces the ``N(0, 1)`` draw from ``seed``.
    """
    model.eval()
    d = model.config.d_model
    device = next(model.parameters()).device
    n_tok = len(tokens)
    if init is None:
        generator = torch.Generator().manual_seed(seed)  # on the CPU, so every device starts from the same vectors
        init = torch.randn(n_tok, samples, d, generator=generator)  # N(0, 1), as the notebooks
    if tuple(init.shape) != (n_tok, samples, d):
        raise ValueError(f"init has shape {tuple(init.shape)}, expected [{n_tok} {samples} {d}]")
    init = init.to(device=device, dtype=torch.float32)
    result = init.clone()
    stopped = np.full(n_tok, -1, dtype=np.int64)
    plateau = np.full(n_tok, -1, dtype=np.int64)
    history = np.full((n_tok, max_steps + 1), np.nan)  # each token's joint NLL before every step
    active = np.arange(n_tok)
    targets_all = torch.as_tensor(list(tokens), dtype=torch.long, device=device)
    param = torch.nn.Parameter(init.reshape(-1, d).clone())
    optimiser = torch.optim.AdamW([param], lr=lr, weight_decay=weight_decay)
    frozen = [p for p in model.parameters() if p.requires_grad]
    for p in frozen:  # only the vectors learn; saves the weight gradients
        p.requires_grad_(False)
    bar = tqdm(total=max_steps, disable=not progress, desc=f"stage {start}", unit="step", mininterval=5)
    try:
        for step in range(max_steps + 1):
            targets = targets_all[torch.from_numpy(active).to(device)].repeat_interleave(samples)
            nll = F.cross_entropy(_token_logits(model, start, param), targets, reduction="none")
            joint = nll.view(len(active), samples).mean(1)  # one test per token over its K samples
            joint_now = joint.detach().double().cpu().numpy()
            history[active, step] = joint_now
            passed = joint_now < target_nll
            flat = np.zeros(len(active), dtype=bool)
            if plateau_window > 0 and step >= plateau_window:
                before = history[active, step - plateau_window]
                flat = ~passed & (before - joint_now < plateau_min_drop)
            done = passed | flat | (step == max_steps)  # at the end of the budget every token stops
            if done.any():
                done_t = torch.from_numpy(done).to(device)
                result[torch.from_numpy(active[done]).to(device)] = param.detach().view(len(active), samples, d)[done_t]
                stopped[active[passed]] = step
                plateau[active[flat]] = step
            keep = ~done
            if not keep.any():
                break
            optimiser.zero_grad(set_to_none=True)
            joint[torch.from_numpy(keep).to(device)].sum().backward()
            optimiser.step()
            if done.any():  # drop the finished tokens and their optimiser state
                param, optimiser = _compact(param, optimiser, keep, samples, lr, weight_decay)
                active = active[keep]
            bar.update(1)
            bar.set_postfix(active_tokens=len(active), refresh=False)
    finally:
        bar.close()
        for p in frozen:
            p.requires_grad_(True)
    with torch.no_grad():
        flat = result.reshape(-1, d)
        nll = F.cross_entropy(_token_logits(model, start, flat), targets_all.repeat_interleave(samples),
                              reduction="none").view(n_tok, samples).double().cpu().numpy()
    return Learned(samples=result.cpu(), stopped_step=stopped, plateau_step=plateau, joint_nll=nll.mean(1),
                   sample_nll=nll, steps=max_steps, history=history)


def _compact(param: torch.nn.Parameter, optimiser: torch.optim.AdamW, keep: np.ndarray, samples: int, lr: float,
             weight_decay: float) -> tuple[torch.nn.Parameter, torch.optim.AdamW]:
    """A new parameter and AdamW holding only the kept tokens' rows, their moments and the step count."""
    rows = torch.from_numpy(np.repeat(keep, samples)).to(param.device)
    state = optimiser.state[param]
    new = torch.nn.Parameter(param.detach()[rows].clone())
    new_optimiser = torch.optim.AdamW([new], lr=lr, weight_decay=weight_decay)
    new_optimiser.state[new] = {"step": state["step"].clone(), "exp_avg": state["exp_avg"][rows].clone(),
                                "exp_avg_sq": state["exp_avg_sq"][rows].clone()}
    return new, new_optimiser


@dataclass(frozen=True)
class Subspace:
    """SVD summary of each token's samples; token axis first."""

    singular: np.ndarray  # [token min(K, d)] uncentred singular values, descending
    singular_centred: np.ndarray  # [token min(K, d)] of the samples minus their mean
    direction: np.ndarray  # [token d_model] first right singular vector, sign aligned to the samples
    median_norm: np.ndarray  # [token] median norm of the samples
    negative_share: np.ndarray  # [token] share of samples with a negative cosine with ``direction``

    @property
    def sigma_ratio(self) -> np.ndarray:
        return _ratio(self.singular)

    @property
    def sigma_ratio_centred(self) -> np.ndarray:
        return _ratio(self.singular_centred)


def _ratio(s: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(s[:, 1] > 0, s[:, 0] / np.where(s[:, 1] > 0, s[:, 1], 1.0), np.inf)


def token_subspaces(samples: np.ndarray | Tensor) -> Subspace:
    """SVD of every token's ``[K d_model]`` stack (float64); ``samples`` is ``[token K d_model]``."""
    x = torch.as_tensor(np.asarray(samples), dtype=torch.float64)
    _, s, vh = torch.linalg.svd(x, full_matrices=False)  # s: [token min(K,d)], vh: [token min(K,d) d]
    s_centred = torch.linalg.svdvals(x - x.mean(1, keepdim=True))
    v = vh[:, 0]  # [token d]
    dots = torch.einsum("tkd,td->tk", x, v)  # same sign as the cosine
    negative = (dots < 0).double().mean(1)
    v = torch.where((negative > 0.5)[:, None], -v, v)
    negative = torch.where(negative > 0.5, 1.0 - negative - (dots == 0).double().mean(1), negative)
    return Subspace(singular=s.numpy(), singular_centred=s_centred.numpy(), direction=v.numpy(),
                    median_norm=x.norm(dim=-1).median(dim=1).values.numpy(), negative_share=negative.numpy())


@torch.no_grad()
def direction_distributions(model: Transformer, start: int, vectors: np.ndarray) -> np.ndarray:
    """Next-token distributions ``[n vocab]`` (float64) of ``vectors`` ``[n d_model]`` fed at stage ``start``."""
    model.eval()
    return softmax(_token_logits(model, start, torch.as_tensor(vectors, dtype=torch.float32))).numpy()


def self_probability(model: Transformer, start: int, tokens: Sequence[int], sub: Subspace) -> np.ndarray:
    """Probability of each token from its direction alone at the samples' median norm: ``[token]``."""
    p = direction_distributions(model, start, sub.direction * sub.median_norm[:, None])
    return p[np.arange(len(tokens)), np.asarray(tokens)]


def mixture_distributions(model: Transformer, start: int, sub: Subspace, pairs: Sequence[tuple[int, int]]) -> np.ndarray:
    """For each pair of token indices (rows of ``sub``), the distribution of ``v_a + v_b`` with each
    direction at its samples' median norm: ``[pair vocab]``."""
    scaled = sub.direction * sub.median_norm[:, None]
    return direction_distributions(model, start, np.array([scaled[a] + scaled[b] for a, b in pairs]))


def mixture_pairs(pairs: Sequence[str], vocab: str, source: str) -> list[tuple[int, int]]:
    """Token ids of the configured pairs of characters (``supporting.mixture_pairs``); ``source``: the
    tokenizer file the vocabulary came from, for the error."""
    unknown = [c for pair in pairs for c in pair if c not in vocab]
    if unknown:
        raise ValueError(f"config key 'supporting.mixture_pairs' names characters {unknown} that are not in the "
                         f"vocabulary of {source}; use single characters of the corpus")
    return [(vocab.index(a), vocab.index(b)) for a, b in pairs]


@dataclass(frozen=True)
class StageAnalysis:
    """One stage of every token (:func:`analyse_stage`): what the rule's three files hold."""

    tensors: dict[str, np.ndarray]  # the learned samples and the subspaces (the safetensors file)
    columns: dict[str, np.ndarray]  # one row per token (the tokens table)
    mixtures: np.ndarray  # [pair vocab]: the distribution of each pair's summed directions


def analyse_stage(model: Transformer, stage: int, vocab: str, pairs: Sequence[tuple[int, int]], samples: int, *,
                  lr: float, weight_decay: float, target_nll: float, max_steps: int, seed: int,
                  plateau_window: int = 0, plateau_min_drop: float = 0.0,
                  device: torch.device | str = "cpu", progress: bool = False) -> StageAnalysis:
    """Learn ``samples`` vectors for every token of ``vocab`` at ``stage`` (on ``device``), their
    subspaces, each token's probability from its direction alone, and the pairs' mixtures (on the CPU)."""
    tokens = list(range(len(vocab)))
    learned = learn_token_vectors(model.to(device), stage, tokens, samples, lr=lr, weight_decay=weight_decay,
                                  target_nll=target_nll, max_steps=max_steps, seed=seed,
                                  plateau_window=plateau_window, plateau_min_drop=plateau_min_drop, progress=progress)
    model = model.cpu()
    learned_samples = learned.samples.cpu()
    sub = token_subspaces(learned_samples)
    columns = {
        "stage": np.full(len(tokens), stage, dtype=np.int8),
        "token_id": np.asarray(tokens, dtype=np.int16),
        "token": list(vocab),
        "reached": learned.stopped_step >= 0,
        "stopped_step": learned.stopped_step.astype(np.int32),
        "plateau_step": learned.plateau_step.astype(np.int32),
        "converged": (learned.stopped_step >= 0) | (learned.plateau_step >= 0),
        "joint_nll": learned.joint_nll,
        "samples_reached": (learned.sample_nll < target_nll).sum(1).astype(np.int32),
        "singular": sub.singular,
        "singular_centred": sub.singular_centred,
        "sigma_ratio": sub.sigma_ratio,
        "sigma_ratio_centred": sub.sigma_ratio_centred,
        "median_norm": sub.median_norm,
        "negative_share": sub.negative_share,
        "self_probability": self_probability(model, stage, tokens, sub),
    }
    tensors = {"samples": learned_samples, "direction": sub.direction, "median_norm": sub.median_norm,
               "singular": sub.singular, "singular_centred": sub.singular_centred,
               "converged": columns["converged"].astype(np.float32)}
    return StageAnalysis(tensors, columns, mixture_distributions(model, stage, sub, pairs))
