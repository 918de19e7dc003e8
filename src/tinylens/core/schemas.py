"""The core's tables: every Parquet schema of the core reproduction (its readers are beside the code that writes
each table). Free of torch, like every family's ``schemas``.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from tinylens.model_config import VECTOR_KINDS
from tinylens.tables import Schema

# --- strings and prompts (core.strings) ---


def strings_schema(vocab_size: int) -> Schema:
    return Schema("strings", {
        "string": pa.string(),
        "occurrences": pa.uint32(),
        "next_counts": pa.list_(pa.uint32(), vocab_size),  # over the whole text (corpus mode)
        "in_train": pa.bool_(),
        "next_counts_train": pa.list_(pa.uint32(), vocab_size),  # over the train text (heldout mode)
    })


PROMPTS_SCHEMA = Schema("prompts", {
    "prompt_id": pa.int32(),
    "string": pa.string(),
    "split": pa.string(),  # "tune" or "eval"
})


# --- activation dumps (core.activations) ---


def block_schema(kinds: Sequence[str], d_model: int) -> Schema:
    unknown = set(kinds) - set(VECTOR_KINDS)
    if unknown:
        raise ValueError(f"unknown activation kinds {sorted(unknown)}; choose from {VECTOR_KINDS}")
    return Schema("activations", {k: pa.list_(pa.float32(), d_model) for k in kinds})


def logits_schema(vocab_size: int) -> Schema:
    return Schema("logits", {"logits": pa.list_(pa.float32(), vocab_size)})


# --- search summaries (core.search) ---


def summary_schema(n_bins: int, vocab_size: int) -> Schema:
    return Schema("search summary", {
        "prompt_id": pa.int32(),
        "block": pa.int8(),
        "bin_matches": pa.list_(pa.uint32(), n_bins),  # strings with cosine in each bin
        "bin_counts": pa.list_(pa.uint32(), n_bins * vocab_size),  # [bins vocab] summed next-token counts
    })


# --- the approximation: the threshold sweep, the per-prompt distances (core.approx) ---


SWEEP_SCHEMA = Schema("threshold sweep", {
    "block": pa.int64(),  # 0-based
    "threshold": pa.float64(),
    "mean_hellinger": pa.float64(),  # of that block alone at that threshold, on the tuning prompts
})


def hellinger_schema(alternate_seeds, n_blocks: int):
    columns = {
        "prompt_id": pa.int32(),
        "string": pa.string(),
        "split": pa.string(),
        "in_train": pa.bool_(),  # the prompt occurs verbatim in the train text
        "hellinger_approx": pa.float64(),  # tuned approximation vs the original model
        "hellinger_paper_values": pa.float64(),  # the paper's hand-tuned values vs the model (NaN if n_layer != 6)
        "no_match": pa.bool_(),  # no string above threshold in any block: the approximation is uniform
        "matches": pa.list_(pa.uint32(), n_blocks),  # strings above each block's tuned threshold
    }
    columns.update({f"hellinger_seed{s}": pa.float64() for s in alternate_seeds})  # alternate vs original
    return Schema("hellinger", columns)


# --- case studies (core.case_studies) ---

MATCHES_SCHEMA = Schema("case-study matches", {
    "prompt": pa.string(),
    "block": pa.int8(),
    "string": pa.string(),
    "cosine": pa.float64(),  # exact float64 cosine of the two ffwd_out vectors
})


# --- the loss curve (core.training_log) ---

LOSS_SCHEMA = Schema("loss curve", {
    "step": pa.int64(), "train_loss": pa.float64(), "val_loss": pa.float64(), "lr": pa.float64(),
    "tokens_seen": pa.int64(), "elapsed_s": pa.float64(),
})


# --- the controls of the core claim (core.controls) ---


def controls_schema(sources) -> Schema:
    """Per evaluation prompt of each reported mode, each control's Hellinger distance from the model."""
    return Schema("controls", {"mode": pa.string(), "prompt_id": pa.int32(),
                               **{f"hellinger_{s}": pa.float64() for s in sources}})
