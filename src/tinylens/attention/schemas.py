"""The attention family's tables: their schemas (column names and Arrow types), in one torch-free
module so that summaries and figures read them without loading the model code.

Depth ``d``: 0 = the embedding output, ``d`` = the output of block ``d`` (``n_layer`` = the input of
``ln_f``). Blocks and heads are 0-based in every table.
"""

from __future__ import annotations

import pyarrow as pa

from tinylens.tables import Schema

#: A numerical eigenvalue "agrees" with the diagonal when the sorted gap is below this.
EIGEN_AGREEMENT = 1e-6

# --- spectra: attention/seed<N>/{diagonal,absorption,heads}.parquet ---
DIAGONAL_SCHEMA = Schema("attention diagonal", {
    "block": pa.int32(), "head": pa.int32(), "sequence": pa.int32(), "position": pa.int32(), "weight": pa.float32(),
})
ABSORPTION_SCHEMA = Schema("attention absorption", {
    "block": pa.int32(), "head": pa.int32(), "steps": pa.int64(),
    "mass_from_last": pa.float64(),  # (S^k)_{T-1,0}, mean over sequences
    "mass_mean": pa.float64(),  # (S^k)_{i,0}, mean over start positions i >= 1 and sequences
})
HEAD_SCHEMA = Schema("attention head", {
    "block": pa.int32(), "head": pa.int32(),
    # self-attention weight S_ii over positions i >= 1 (S_00 = 1 always) and sequences
    "diag_mean": pa.float64(), "diag_median": pa.float64(), "diag_q10": pa.float64(), "diag_q90": pa.float64(),
    "slowest_transient_eigenvalue": pa.float64(),  # median over sequences of max_{i>=1} S_ii
    "half_absorption_from_last": pa.float64(),  # walk length at which half the mass is at position 0 (inf: never)
    "half_absorption_mean": pa.float64(),
    "share_distance": pa.float64(), "share_key_norm": pa.float64(), "share_cross": pa.float64(),
    "share_key_effect": pa.float64(), "share_interaction": pa.float64(),
    "row_sum_max_error": pa.float64(), "above_diagonal_max": pa.float64(),
    # numerical eigensolver (on a rotated copy) vs the diagonal, over the checked sample of matrices
    "eigen_gap_median": pa.float64(), "eigen_gap_max": pa.float64(),
    "eigen_agree_share": pa.float64(),  # share of the checked matrices whose gap is below EIGEN_AGREEMENT
    "pattern_vs_scores_max_error": pa.float64(),  # |pattern - softmax(q k^T / sqrt(d_head))|
})

# --- the convex-hull reading (method.md §10): attention/seed<N>/hull.parquet, one row per (block, head, window)
#: The weightings of a head's values the convex-hull measure compares: its attention, that attention's rows
#: permuted over the visible positions, and uniform.
WEIGHTINGS = ("real", "shuffled", "uniform")
HULL_SCHEMA = Schema("attention convex hull", {
    "block": pa.int8(), "head": pa.int8(), "window": pa.int32(),
    # mean over query positions t < T - 1 of |v_{t+1} - sum_j W_tj v_j|^2 / |v_{t+1}|^2 and of their cosine,
    # for W the head's attention (real), its rows permuted over the visible positions (shuffled), uniform
    "real_potential": pa.float64(), "real_cosine": pa.float64(),
    "shuffled_potential": pa.float64(), "shuffled_cosine": pa.float64(),
    "uniform_potential": pa.float64(), "uniform_cosine": pa.float64(),
    "identity_error": pa.float64(),  # largest |z - A v| of the block: the head output is the weighted mean
})

# --- trajectories: attention/seed<N>/trajectories.parquet ---
TRAJECTORY_SCHEMA = Schema("attention trajectory", {
    "depth": pa.int32(),  # 0 = embedding output, d = output of block d (n_layer = input of ln_f)
    "sequence": pa.int32(), "position": pa.int32(),
    "token": pa.int32(), "next_token": pa.int32(),
    # logit lens and tuned lens: 1-based rank and probability of the next token, KL(final || lens),
    # entropy of the lens distribution (nats)
    "logit_rank": pa.int32(), "logit_prob": pa.float64(), "logit_kl": pa.float64(), "logit_entropy": pa.float64(),
    "tuned_rank": pa.int32(), "tuned_prob": pa.float64(), "tuned_kl": pa.float64(), "tuned_entropy": pa.float64(),
    # cosine of the residual stream with the next token's lm_head row / tok_emb row, and its rank among all tokens
    "cos_unembed": pa.float64(), "cos_unembed_rank": pa.int32(),
    "cos_embed": pa.float64(), "cos_embed_rank": pa.int32(),
})

# --- tuned lens: attention/seed<N>/tuned_lens_training.csv ---
#: The training curve: one row per step and depth, mean KL(final || lens) of the step's batch.
HISTORY_SCHEMA = Schema("tuned-lens training curve", {
    "step": pa.int64(), "depth": pa.int64(), "kl": pa.float64(), "lr": pa.float64(),
})

# --- probes: attention/seed<N>/{probes,passages}.parquet ---
PROBE_SCHEMA = Schema("attention probe", {
    "depth": pa.int32(), "classifier": pa.string(),  # CLASSIFIERS or "chance"
    "accuracy": pa.float64(), "balanced_accuracy": pa.float64(),
    "accuracy_std": pa.float64(), "balanced_accuracy_std": pa.float64(),  # over label shuffles (0: deterministic)
})
PASSAGE_SCHEMA = Schema("speaker passage", {
    "split": pa.string(), "speaker": pa.string(), "text": pa.string(),
})
