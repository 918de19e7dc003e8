"""Per-head scores of induction and copying (method.md §8; source 004, after Olsson et al. 2022).

Detection patterns ``D`` are ``[batch pos pos]`` 0/1 masks over (query, key); a head's pattern
``A`` is ``[batch n_heads pos pos]`` (rows sum to 1). The scores:

- **prefix matching**: on sequences of random tokens repeated several times, the attention mass
  a query at position i puts on key positions j + 1 with tok_j = tok_i and j < i (the token that
  followed an earlier occurrence of the current one), averaged over the query positions of
  repeats 2 and later;
- **previous-token** and **duplicate-token**: TransformerLens's head detector with the "mul"
  error measure, sum(A * D) / sum(A) per sequence, averaged over sequences;
- **copying**, two forms: the eigenvalues of the token-basis OV circuit
  ``W_E W_V W_O W_U``, score = sum(Re lambda) / sum(|lambda|) (+1 for pure copying, -1 for pure
  anti-copying); and the direct-logit form, measured on the repeated sequences.

>>> import torch
>>> tokens = torch.tensor([[0, 1, 2, 0, 1, 2]])
>>> prefix_matching_pattern(tokens)[0, 3].tolist()  # query 3 (token 0) -> key 1 (after the earlier 0)
[0.0, 1.0, 0.0, 0.0, 0.0, 0.0]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported inside the functions that use it: jobs that only read tables skip it
    from torch import Tensor


def previous_token_pattern(pos: int) -> Tensor:
    """D[i, i - 1] = 1: ``[pos pos]`` (TransformerLens's previous-token detection pattern)."""
    import torch
    return torch.diag(torch.ones(pos - 1), diagonal=-1)


def duplicate_token_pattern(tokens: Tensor) -> Tensor:
    """D[i, j] = 1 where tok_j = tok_i and j < i: ``[batch pos] -> [batch pos pos]``
    (TransformerLens's duplicate-token pattern: the current token itself excluded)."""
    import torch
    same = tokens[:, :, None] == tokens[:, None, :]
    return torch.tril(same, diagonal=-1).to(torch.float32)


def prefix_matching_pattern(tokens: Tensor) -> Tensor:
    """D[i, j + 1] = 1 where tok_j = tok_i and j < i: ``[batch pos] -> [batch pos pos]``
    (the duplicate-token pattern shifted one key to the right: TransformerLens's induction pattern)."""
    import torch
    duplicate = duplicate_token_pattern(tokens)
    shifted = torch.zeros_like(duplicate)
    shifted[:, :, 1:] = duplicate[:, :, :-1]
    return shifted


def detection_score(pattern: Tensor, detection: Tensor, queries: Tensor | None = None) -> Tensor:
    """sum(A * D) / sum(A) over the chosen query rows, per sequence, averaged over sequences.

    pattern: ``[batch n_heads pos pos]``; detection: ``[batch pos pos]`` or ``[pos pos]``;
    queries: ``[pos]`` bool, the query rows that count (default all: TransformerLens's "mul"
    score). Returns ``[n_heads]``.
    """
    if detection.dim() == 2:
        detection = detection[None]
    rows = pattern if queries is None else pattern[:, :, queries]
    masks = detection[:, None] if queries is None else detection[:, None, queries]
    hits = (rows * masks).sum(dim=(-1, -2))  # [batch n_heads]
    return (hits / rows.sum(dim=(-1, -2))).mean(0)


def repeat_queries(pos: int, repeat_length: int) -> Tensor:
    """The query positions of repeats 2 and later of a sequence of ``repeat_length``-token repeats."""
    import torch
    return torch.arange(pos) >= repeat_length


def prefix_matching_score(pattern: Tensor, tokens: Tensor, repeat_length: int) -> Tensor:
    """Attention mass on the tokens after earlier occurrences of the current token, averaged over the
    query positions of repeats 2 and later: pattern ``[batch n_heads pos pos]``, tokens
    ``[batch pos]`` -> ``[n_heads]``."""
    return detection_score(pattern, prefix_matching_pattern(tokens),
                           repeat_queries(tokens.shape[1], repeat_length).to(pattern.device))


def copying_score_eigen(W_E: Tensor, W_V: Tensor, W_O: Tensor, W_U: Tensor) -> Tensor:
    """sum(Re lambda) / sum(|lambda|) over the eigenvalues of ``W_E W_V[h] W_O[h] W_U`` per head.

    W_E: ``[vocab d_model]``, W_V: ``[n_heads d_model d_head]``, W_O: ``[n_heads d_head d_model]``,
    W_U: ``[d_model vocab]`` (row-vector convention; LayerNorms left out, as the formula is
    written). The vocab x vocab circuit has rank <= d_head; its nonzero eigenvalues are those of
    the d_head x d_head product ``W_O W_U W_E W_V`` (same product, cyclically rotated), which is
    what is decomposed. Returns ``[n_heads]``.
    """
    import torch
    small = W_O.double() @ W_U.double() @ W_E.double() @ W_V.double()  # [n_heads d_head d_head]
    eig = torch.linalg.eigvals(small)
    return eig.real.sum(-1) / eig.abs().sum(-1).clamp_min(1e-300)


def copying_score_logits(head_logits: Tensor, attended: Tensor) -> Tensor:
    """Direct-logit copying: how much of a head's positive logit effect goes to the attended token.

    head_logits: ``[batch n_heads queries vocab]``, each head's direct logits
    (:func:`tinylens.interventions.direct_logits`) at the query positions; attended:
    ``[batch n_heads queries]``, the token at the key each head attends to most. The logits are
    mean-subtracted over the vocabulary and passed through a ReLU; the attended token's share of
    the total s (0 where nothing is positive) is averaged over sequences and queries and rescaled
    to [-1, 1] as 2 s - 1: +1 when all of the head's boost goes to the token it attends to, -1
    when none does. Returns ``[n_heads]``.
    """
    import torch
    boost = torch.relu(head_logits - head_logits.mean(-1, keepdim=True))
    total = boost.sum(-1)
    own = boost.gather(-1, attended[..., None]).squeeze(-1)
    share = torch.where(total > 0, own / total.clamp_min(1e-30), torch.zeros_like(total))
    return 2 * share.mean(dim=(0, 2)) - 1


def attended_tokens(pattern: Tensor, tokens: Tensor) -> Tensor:
    """The token at the key each query attends to most: pattern ``[batch n_heads q pos]``, tokens
    ``[batch pos]`` -> ``[batch n_heads q]``."""
    keys = pattern.argmax(-1)  # [batch n_heads q]
    return tokens[:, None, :].expand(-1, pattern.shape[1], -1).gather(-1, keys)
