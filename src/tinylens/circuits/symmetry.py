"""The symmetry argument of method.md §9: the same model with different weights.

Ignoring LayerNorm, for any invertible ``T`` ``[d_model d_model]`` the map::

    W_E -> W_E T,  P -> P T                          (embeddings write the residual stream)
    W_out -> W_out T, b_out -> b_out T                (W_O and proj's bias; ffwd's second layer and bias)
    W_in -> T^-1 W_in                                 (W_Q, W_K, W_V; ffwd's first layer; W_U)

(row-vector convention: a residual state ``x`` becomes ``x T``) gives a model that computes the
same function: every read sees ``x T T^-1 W = x W``. Attention scores, softmax and ReLU only ever
see such reads, so the whole LayerNorm-free model is invariant, nonlinearities included.

With LayerNorm kept it is not: LayerNorm centres (subtracts the mean over coordinates) and
divides by the standard deviation, which commute with ``x -> x T`` only for ``T = s Q`` with ``Q``
orthogonal and mapping the all-ones direction to itself (up to sign), and ``s > 0`` a scale that
the gain can absorb. :func:`transform_model` with ``layernorm="fold"`` is the best one can do
with the LayerNorm kept: fold each gain into the matrices that read after it (``W -> diag(g) W``,
the bias then becomes ``b / g`` so the LayerNorm output times the folded reader is unchanged),
then transform the bias as a residual vector (``b -> b T``) and set the gain to ``s = |det T|^(1/d)``.
That is exact for the ``T`` above and for no other; ``layernorm="untouched"`` leaves the trained
LayerNorm parameters as they are (then even a permutation changes the logits, unless the gains
happen to be equal on the permuted coordinates).

:func:`without_layernorm` is the LayerNorm-free model itself: a different model from the trained
one (every LayerNorm replaced by the identity, everything else as trained), run through the one
forward pass of :mod:`tinylens.interventions`.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import torch
from torch import Tensor, nn

from tinylens.circuits.composition import BASES, KINDS, basis_of, composition_scores, head_factors
from tinylens.circuits.schemas import SYMMETRY_SCHEMA
from tinylens.interventions import run
from tinylens.measures import descending_ranks, kendall_tau
from tinylens.model import Transformer

LN_MODES = ("fold", "untouched")


def haar_orthogonal(d: int, generator: torch.Generator) -> Tensor:
    """A Haar-random orthogonal ``[d d]`` (QR of a Gaussian with the sign of R's diagonal fixed)."""
    q, r = torch.linalg.qr(torch.randn(d, d, generator=generator, dtype=torch.float64))
    return q * torch.sign(torch.diagonal(r))[None, :]


def with_condition_number(d: int, condition: float, generator: torch.Generator) -> Tensor:
    """``U diag(s) V^T`` with Haar ``U, V`` and singular values spread log-evenly over
    ``[condition^-1/2, condition^1/2]``: condition number ``condition``, ``|det| = 1``."""
    u, v = haar_orthogonal(d, generator), haar_orthogonal(d, generator)
    s = torch.logspace(0.5, -0.5, d, base=float(condition), dtype=torch.float64)
    return u @ torch.diag(s) @ v.T


def orthogonal_fixing_ones(d: int, generator: torch.Generator) -> Tensor:
    """A random orthogonal ``T`` with ``1 T = 1``: Haar on the complement of the all-ones direction."""
    ones = torch.full((d, 1), d ** -0.5, dtype=torch.float64)
    # An orthonormal basis of the complement: the last d-1 columns of a QR whose first column is ones.
    basis, _ = torch.linalg.qr(torch.cat([ones, torch.randn(d, d - 1, generator=generator, dtype=torch.float64)], 1))
    comp = basis[:, 1:]
    return ones @ ones.T + comp @ haar_orthogonal(d - 1, generator) @ comp.T


def make_transforms(d: int, seed: int, conditions: tuple[float, ...] = (10.0, 1000.0),
                    scale: float = 3.0) -> dict[str, Tensor]:
    """The ``T`` of the symmetry test for width ``d`` (float64), reproducible from ``seed``, by name
    in report order.

    The first four are method.md's: ``permutation`` (reorders the residual coordinates at random:
    the source's swap of coordinates, generalised to all of them), ``orthogonal`` (Haar), and
    ``cond<c>`` for each condition number ``c`` of ``conditions``. The last two are the kinds that
    survive LayerNorm, shown for contrast: ``orthogonal_fixing_ones`` and ``scaling`` (``scale * I``).
    """
    gen = torch.Generator().manual_seed(seed)
    perm = torch.randperm(d, generator=gen)
    eye = torch.eye(d, dtype=torch.float64)
    return {
        "permutation": eye[perm],
        "orthogonal": haar_orthogonal(d, gen),
        **{f"cond{c:g}": with_condition_number(d, c, gen) for c in conditions},
        "orthogonal_fixing_ones": orthogonal_fixing_ones(d, gen),
        "scaling": scale * eye,
    }


def fresh_copy(model: Transformer, dtype: torch.dtype | None = None) -> Transformer:
    """An independent copy of ``model`` (in ``dtype``, default its own) in eval mode: a fresh
    module tree with the weights loaded, much faster than ``copy.deepcopy``."""
    dtype = dtype or model.tok_emb.weight.dtype
    new = Transformer(model.config).to(dtype)
    new.load_state_dict({k: v.detach().to(dtype) for k, v in model.state_dict().items()})
    return new.eval()


def _layernorms(model: Transformer) -> list[tuple[nn.Module, list[nn.Linear]]]:
    """Each normalisation layer (LayerNorm, or RMSNorm in the variant model) with the Linear layers that read its
    output."""
    pairs = []
    for blk in model.blocks:
        pairs.append((blk.ln1, [blk.sa.qkv]))
        pairs.append((blk.ln2, [blk.ffwd.net[0]]))
    pairs.append((model.ln_f, [model.lm_head]))
    return pairs


@torch.no_grad()
def transform_model(model: Transformer, t: Tensor, layernorm: str = "fold") -> Transformer:
    """A float64 copy of ``model`` with every residual read and write transformed by ``t`` (module doc).

    ``layernorm``: ``"fold"`` (fold the gains into the readers first, then ``b -> b T``, gain
    ``-> |det T|^(1/d)``) or ``"untouched"`` (LayerNorm parameters as trained). Reading Linear layers
    ``y = x W^T`` get ``W -> W T^-T``; writing ones ``W -> T^T W`` and ``b -> b T``.
    """
    if layernorm not in LN_MODES:
        raise ValueError(f"layernorm must be one of {LN_MODES}, not {layernorm!r}")
    d = model.config.d_model
    t = t.to(torch.float64)
    if t.shape != (d, d):
        raise ValueError(f"T must be [d_model d_model] = [{d} {d}], got {tuple(t.shape)}")
    new = fresh_copy(model, torch.float64)
    if layernorm == "fold":
        for ln, readers in _layernorms(new):
            g = ln.weight.clone()
            if torch.any(g.abs() < 1e-8):
                raise ValueError("a LayerNorm gain is (near) zero: its bias cannot be moved past the gain")
            for lin in readers:
                lin.weight.mul_(g[None, :])
            if getattr(ln, "bias", None) is not None:  # RMSNorm has none
                ln.bias.div_(g)
            ln.weight.fill_(1.0)
    t_inv_t = torch.linalg.inv(t).T  # T^-T
    new.tok_emb.weight.copy_(new.tok_emb.weight @ t)
    new.pos_emb.weight.copy_(new.pos_emb.weight @ t)
    for blk in new.blocks:
        for reader in (blk.sa.qkv, blk.ffwd.net[0]):
            reader.weight.copy_(reader.weight @ t_inv_t)
        for writer in (blk.sa.proj, blk.ffwd.net[2]):
            writer.weight.copy_(t.T @ writer.weight)
            writer.bias.copy_(writer.bias @ t)
    new.lm_head.weight.copy_(new.lm_head.weight @ t_inv_t)
    if layernorm == "fold":
        scale = float(torch.exp(torch.linalg.slogdet(t).logabsdet / d))
        for ln, _ in _layernorms(new):
            if getattr(ln, "bias", None) is not None:
                ln.bias.copy_(ln.bias @ t)
            ln.weight.fill_(scale)
    return new


def without_layernorm(model: Transformer) -> Transformer:
    """The LayerNorm-free model: a copy of ``model`` whose ``ln1``, ``ln2`` and ``ln_f`` are the identity.

    A different model from the trained one (its logits differ); it is the model the symmetry
    argument is exact for. Run it through :func:`tinylens.interventions.run` like any other.
    """
    new = fresh_copy(model)
    for blk in new.blocks:
        blk.ln1, blk.ln2 = nn.Identity(), nn.Identity()
    new.ln_f = nn.Identity()
    return new


def with_layernorm_eps(model: Transformer, eps: float) -> Transformer:
    """``model`` (changed in place, and returned) with every LayerNorm's ``eps`` set to ``eps``.

    LayerNorm divides by ``sqrt(var + eps)``, so a scaling of the residual stream changes its output
    slightly; with ``eps = 0`` scalings absorbed by the gain are exact, which separates the two effects.
    """
    for module in model.modules():
        if isinstance(module, (nn.LayerNorm, nn.RMSNorm)):
            module.eps = eps
    return model


def rank_changes(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """|rank before - rank after| of each item (rank 0 = largest; ties broken by position)."""
    rank = partial(descending_ranks, base=0, ties="by_position")
    return np.abs(rank(np.asarray(before)) - rank(np.asarray(after)))


def _pair_scores(model: Transformer, basis: str) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """LayerNorm-ignored scores of every pair in ``basis``: ``({kind: [pairs]}, a_index, b_index)``."""
    f = head_factors(model, basis_of(model, basis, "ignored"))
    a_idx, b_idx = np.nonzero(f.layer[None, :] > f.layer[:, None])
    scores = {k: composition_scores(f, k).numpy()[a_idx, b_idx] for k in KINDS}
    return scores, np.stack([f.layer[a_idx], f.head[a_idx]]), np.stack([f.layer[b_idx], f.head[b_idx]])


@torch.no_grad()
def symmetry_test(model: Transformer, transforms: dict[str, Tensor], tokens: Tensor, log=None) -> tuple[dict, dict]:
    """Apply every ``T`` of ``transforms`` to ``model`` and measure what moves (method.md §9).

    tokens: ``[batch pos]`` ids whose logits are compared. Returns ``(columns, summary)``: the
    columns of the before/after score table (LayerNorm ignored, both bases) and per ``T``: Kendall's
    tau and the largest rank change of the residual-basis pair ranking, the largest score change in
    each basis, the largest logit change of the LayerNorm-free model, and of the real model with
    the LayerNorm folded (``fold``) or left as trained (``untouched``), and with the LayerNorm
    folded and its ``eps`` set to 0 in both models (``fold_eps0``).
    """
    base = fresh_copy(model, torch.float64)
    before = {b: _pair_scores(base, b) for b in BASES}
    free_logits = run(without_layernorm(base), tokens).logits
    real_logits = run(base, tokens).logits
    real_logits_eps0 = run(with_layernorm_eps(fresh_copy(base), 0.0), tokens).logits
    d = model.config.d_model
    ones = torch.ones(1, d, dtype=torch.float64)
    cols: dict[str, list] = {k: [] for k in SYMMETRY_SCHEMA.columns}
    summary: dict[str, dict] = {}
    for name, t in transforms.items():
        moved = transform_model(base, t, layernorm="untouched")
        svals = torch.linalg.svdvals(t)
        entry = {
            "condition_number": float(svals[0] / svals[-1]),
            "orthogonal": bool(torch.allclose(t @ t.T, torch.eye(d, dtype=torch.float64), atol=1e-10)),
            "fixes_ones": bool(torch.allclose(ones @ t, ones, atol=1e-10)),
            "scores": {},
        }
        for basis in BASES:
            after, pa_, pb_ = _pair_scores(moved, basis)
            scores_before = before[basis][0]
            for kind in KINDS:
                x, y = scores_before[kind], after[kind]
                stats = {"max_abs_change": float(np.max(np.abs(y - x)))}
                if basis == "residual":
                    stats["kendall_tau"] = kendall_tau(x, y)
                    stats["max_rank_change"] = int(rank_changes(x, y).max())
                entry["scores"].setdefault(basis, {})[kind] = stats
                n = len(x)
                cols["transform"] += [name] * n
                cols["basis"] += [basis] * n
                cols["kind"] += [kind] * n
                for key, arr in (("layer_a", pa_[0]), ("head_a", pa_[1]), ("layer_b", pb_[0]), ("head_b", pb_[1])):
                    cols[key].append(arr)
                cols["score_before"].append(x)
                cols["score_after"].append(y)
        free_after = run(without_layernorm(moved), tokens).logits
        entry["layernorm_free_max_logit_change"] = float((free_after - free_logits).abs().max())
        entry["layernorm_free_max_abs_logit"] = float(free_logits.abs().max())
        for mode in LN_MODES:
            real_after = run(transform_model(base, t, layernorm=mode), tokens).logits
            entry[f"real_{mode}_max_logit_change"] = float((real_after - real_logits).abs().max())
        eps0 = run(with_layernorm_eps(transform_model(base, t, layernorm="fold"), 0.0), tokens).logits
        entry["real_fold_eps0_max_logit_change"] = float((eps0 - real_logits_eps0).abs().max())
        entry["real_max_abs_logit"] = float(real_logits.abs().max())
        summary[name] = entry
        if log is not None:
            log.info("%s: cond %.3g, residual tau %s, token max change %.2e, logit change: LN-free %.2e, "
                     "real (fold) %.2e, real (untouched) %.2e", name, entry["condition_number"],
                     {k: round(v["kendall_tau"], 3) for k, v in entry["scores"]["residual"].items()},
                     max(v["max_abs_change"] for v in entry["scores"]["token"].values()),
                     entry["layernorm_free_max_logit_change"], entry["real_fold_max_logit_change"],
                     entry["real_untouched_max_logit_change"])
    for key in ("layer_a", "head_a", "layer_b", "head_b"):
        cols[key] = np.concatenate(cols[key]).astype(np.int32)
    for key in ("score_before", "score_after"):
        cols[key] = np.concatenate(cols[key]).astype(np.float64)
    return cols, summary


def near_symmetric(basis: Tensor, epsilon: float) -> Tensor:
    """``exp(epsilon S)`` with ``S = Q diag(s) Q^T`` symmetric, ``Q`` = ``basis`` (orthogonal ``[d d]``) and ``s``
    spread evenly over [-1, 1] (spectral norm 1): a map ``epsilon`` away from the identity, condition number
    ``exp(2 epsilon)``, |det| = 1."""
    d = basis.shape[0]
    return basis @ torch.diag(torch.exp(epsilon * torch.linspace(-1.0, 1.0, d, dtype=torch.float64))) @ basis.T


@torch.no_grad()
def near_symmetries(model: Transformer, tokens: Tensor, epsilons, seed: int, log=None) -> list[dict]:
    """Source 003's near-symmetries: for each ``epsilon``, the map ``T = exp(epsilon S)`` (:func:`near_symmetric`,
    one ``S`` for all) applied to the real model with its normalisation folded (:func:`transform_model`), and
    what it moves: the output, as the mean over ``tokens``' positions of KL(model || mapped model) in nats (and
    the largest), and the residual-basis composition ranking (normalisation ignored), as Kendall's tau per
    kind. A map is a near-symmetry when it moves the output little while the ranking's tau drops."""
    from tinylens.measures import kl_from_logits

    base = fresh_copy(model, torch.float64)
    before = _pair_scores(base, "residual")[0]
    logits = run(base, tokens).logits
    basis = haar_orthogonal(model.config.d_model, torch.Generator().manual_seed(seed))  # one S for every epsilon
    out = []
    for epsilon in epsilons:
        t = near_symmetric(basis, epsilon)
        kl = kl_from_logits(logits, run(transform_model(base, t, layernorm="fold"), tokens).logits)
        after = _pair_scores(transform_model(base, t, layernorm="untouched"), "residual")[0]
        taus = {k: kendall_tau(before[k], after[k]) for k in KINDS}
        out.append({"epsilon": float(epsilon), "condition_number": float(np.exp(2 * epsilon)),
                    "kl_mean": float(kl.mean()), "kl_max": float(kl.max()), "kendall_tau": taus,
                    "kendall_tau_min": min(taus.values())})
        if log is not None:
            log.info("epsilon %g: KL mean %.3g max %.3g nats, residual tau %s", epsilon, out[-1]["kl_mean"],
                     out[-1]["kl_max"], {k: round(v, 3) for k, v in taus.items()})
    return out


def token_windows(ids: np.ndarray, n: int, length: int) -> Tensor:
    """``n`` windows of ``length`` token ids, evenly spaced over ``ids``: ``[n length]`` int64."""
    if len(ids) < length:
        raise ValueError(f"need at least {length} token ids for one window, got {len(ids)}")
    starts = np.linspace(0, len(ids) - length, n).astype(np.int64)
    return torch.as_tensor(np.stack([ids[s:s + length] for s in starts]).astype(np.int64))
