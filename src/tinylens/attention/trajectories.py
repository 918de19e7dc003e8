"""A token's residual stream across depth, read with the logit lens (method.md §10).

Depth ``d``: 0 = the embedding output, ``d`` = the output of block ``d`` (``n_layer`` = the input
of ``ln_f``). The logit lens at depth ``d`` feeds that depth's residual stream straight into
``ln_f`` (which recomputes its statistics from it) and ``lm_head``:
``run(model, resid=h_d, start=n_layer)``. At ``d = n_layer`` it is the model's own output.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from tinylens import measures
from tinylens.attention.tuned_lens import TunedLens
from tinylens.interventions import run
from tinylens.model import Transformer


def evenly_spaced_windows(ids: np.ndarray, n: int, length: int) -> np.ndarray:
    """``n`` windows of ``length`` consecutive ids, starts spread evenly over ``ids`` (no randomness).

    ``[n length]`` int64. Raises ValueError, saying how many tokens it needs, when ``ids`` is too short.
    """
    if n < 1 or length < 1:
        raise ValueError(f"need n >= 1 windows of length >= 1, got n={n}, length={length}")
    if len(ids) < length:
        raise ValueError(f"{len(ids)} tokens cannot hold one window of {length}; use a larger text "
                         "(corpus_chars) or a smaller context (block_size)")
    starts = np.linspace(0, len(ids) - length, n).round().astype(np.int64)
    return np.stack([np.asarray(ids[s : s + length], dtype=np.int64) for s in starts])


def depth_residuals(model: Transformer, tokens: Tensor) -> Tensor:
    """The residual stream at every depth: tokens ``[batch pos]`` -> ``[depth batch pos d_model]``
    with ``depth = n_layer + 1`` (each block's input, then the input of ``ln_f``)."""
    trace = run(model, tokens, record=["blocks.*.block_input", "ln_f_input"])
    return torch.cat([trace.stacked("block_input"), trace["ln_f_input"].unsqueeze(0)])


def logit_lens(model: Transformer, resid: Tensor) -> Tensor:
    """``lm_head(ln_f(resid))`` through the intervention API: ``[... pos d_model] -> [... pos vocab]``."""
    lead, (pos, d_model) = resid.shape[:-2], resid.shape[-2:]
    logits = run(model, resid=resid.reshape(-1, pos, d_model), start=model.config.n_layer).logits
    return logits.reshape(*lead, pos, logits.shape[-1])


def lens_statistics(lens_logits: Tensor, final_logits: Tensor, targets: Tensor) -> dict[str, Tensor]:
    """What a lens says about the true next token and how far it is from the final distribution.

    lens_logits ``[... vocab]``, final_logits broadcastable to it, targets ``[...]`` -> ``rank``
    (1-based, int64) and ``prob`` of the target, ``kl`` = KL(final || lens) and ``entropy`` of the
    lens distribution (nats, float64), each ``[...]``.
    """
    targets = targets.expand(lens_logits.shape[:-1])
    probs = measures.softmax(lens_logits)
    return {
        "rank": measures.descending_ranks(lens_logits, base=1, ties="shared", index=targets),
        "prob": probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1),
        "kl": measures.kl_from_logits(final_logits.expand_as(lens_logits), lens_logits),
        "entropy": measures.entropy(probs),
    }


def next_token_cosines(resid: Tensor, table: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
    """Cosine of each state with its next token's row of ``table`` and that cosine's rank among all rows.

    resid ``[... d_model]``, table ``[vocab d_model]`` (``lm_head.weight`` or ``tok_emb.weight``),
    targets ``[...]`` -> (cosine float64, 1-based rank int64), each ``[...]``. Rank 1 means the next
    token's row is the closest direction of all vocab rows.
    """
    lead = resid.shape[:-1]
    cos = measures.cosine_matrix(resid.reshape(-1, resid.shape[-1]), table).reshape(*lead, table.shape[0])
    targets = targets.expand(lead)
    return cos.gather(-1, targets.unsqueeze(-1)).squeeze(-1), measures.descending_ranks(cos, base=1, ties="shared", index=targets)


def collect_positions(model: Transformer, tokens: Tensor, batch_size: int = 32) -> tuple[Tensor, Tensor]:
    """Every position of ``tokens`` ``[sequences pos]`` as training data for a lens:
    (residual streams ``[depth positions d_model]``, the model's logits ``[positions vocab]``)."""
    resid, logits = [], []
    for start in range(0, len(tokens), batch_size):
        with torch.no_grad():
            r = depth_residuals(model, tokens[start : start + batch_size])
            logits.append(logit_lens(model, r[-1]).flatten(0, 1))
        resid.append(r.flatten(1, 2))
    return torch.cat(resid, dim=1), torch.cat(logits)




def measure_trajectories(model: Transformer, windows: Tensor, lens: TunedLens) -> dict[str, np.ndarray]:
    """Logit lens, tuned lens and next-token cosines at every depth and position of ``windows``.

    windows ``[sequences pos+1]``: the model reads ``windows[:, :-1]``; the next token of position
    ``t`` is ``windows[:, t+1]``. ``lens`` translates depths ``0..n_layer-1``; at depth ``n_layer``
    both lenses are the model's output. Returns the columns of
    :data:`~tinylens.attention.schemas.TRAJECTORY_SCHEMA`.
    """
    tokens, targets = windows[:, :-1], windows[:, 1:]
    n_layer = model.config.n_layer
    if lens.n_depths != n_layer:
        raise ValueError(f"the tuned lens has {lens.n_depths} translators, the model {n_layer} blocks")
    with torch.no_grad():
        resid = depth_residuals(model, tokens)  # [depth seq pos d_model]
        plain = logit_lens(model, resid)  # [depth seq pos vocab]
        final = plain[-1]
        tuned = torch.cat([lens(model, resid[:-1]), final.unsqueeze(0)])
        logit_stats = lens_statistics(plain, final, targets)
        tuned_stats = lens_statistics(tuned, final, targets)
        cos_u, rank_u = next_token_cosines(resid, model.lm_head.weight, targets)
        cos_e, rank_e = next_token_cosines(resid, model.tok_emb.weight, targets)
    depth, seq, pos = np.meshgrid(np.arange(n_layer + 1), np.arange(len(tokens)), np.arange(tokens.shape[1]),
                                  indexing="ij")
    every = resid.shape[:3]
    columns = {"depth": depth, "sequence": seq, "position": pos,
               "token": tokens.expand(every), "next_token": targets.expand(every)}
    for prefix, stats in (("logit", logit_stats), ("tuned", tuned_stats)):
        columns |= {f"{prefix}_{k}": v for k, v in stats.items()}
    columns |= {"cos_unembed": cos_u, "cos_unembed_rank": rank_u, "cos_embed": cos_e, "cos_embed_rank": rank_e}
    return {k: (v.cpu().numpy() if isinstance(v, Tensor) else v).ravel() for k, v in columns.items()}


def depth_summary(columns: dict[str, np.ndarray]) -> list[dict[str, float]]:
    """Per depth, over all positions of a trajectory table: mean rank and mean probability of the
    next token, share of positions where it ranks first, mean KL(final || lens) and entropy, for
    both lenses; mean next-token cosines and their mean rank."""
    rows = []
    for d in np.unique(columns["depth"]):
        sel = columns["depth"] == d
        row = {"depth": int(d)}
        for prefix in ("logit", "tuned"):
            row |= {f"{prefix}_rank_mean": float(columns[f"{prefix}_rank"][sel].mean()),
                    f"{prefix}_top1": float((columns[f"{prefix}_rank"][sel] == 1).mean()),
                    f"{prefix}_prob_mean": float(columns[f"{prefix}_prob"][sel].mean()),
                    f"{prefix}_kl_mean": float(columns[f"{prefix}_kl"][sel].mean()),
                    f"{prefix}_entropy_mean": float(columns[f"{prefix}_entropy"][sel].mean())}
        for name in ("cos_unembed", "cos_embed"):
            row |= {f"{name}_mean": float(columns[name][sel].mean()),
                    f"{name}_rank_mean": float(columns[f"{name}_rank"][sel].mean())}
        rows.append(row)
    return rows


def final_state_alignment(model: Transformer, windows: Tensor) -> dict[str, np.ndarray]:
    """Source 001's premise, on every position of ``windows`` ``[sequences pos+1]``: the final state (the input of
    ``ln_f``) against its next token's row of the token embedding and of the unembedding (the same row when the
    model ties them): the cosine and its 1-based rank among all rows, one value per position."""
    tokens, targets = windows[:, :-1], windows[:, 1:]
    with torch.no_grad():
        final = depth_residuals(model, tokens)[-1]
        cos_e, rank_e = next_token_cosines(final, model.tok_emb.weight, targets)
        cos_u, rank_u = next_token_cosines(final, model.lm_head.weight, targets)
    return {k: v.cpu().numpy().ravel() for k, v in
            {"cos_embed": cos_e, "cos_embed_rank": rank_e, "cos_unembed": cos_u, "cos_unembed_rank": rank_u}.items()}


def alignment_summary(columns: dict[str, np.ndarray], vocab_size: int) -> dict:
    """The premise's tests over positions: the mean cosine with the next token's embedding row against 0, and
    its mean rank against chance, (vocab + 1) / 2 (:func:`tinylens.measures.mean_test`); the same for the
    unembedding row beside them."""
    chance = (vocab_size + 1) / 2
    return {"positions": len(columns["cos_embed"]), "vocab_size": vocab_size, "chance_rank": chance,
            **{name: {"cosine": measures.mean_test(columns[name], 0.0),
                      "rank": measures.mean_test(columns[f"{name}_rank"].astype(np.float64), chance)}
               for name in ("cos_embed", "cos_unembed")}}
