"""This family's tables: every Parquet schema, and the readers that give them back as numpy columns.

Free of torch, so the jobs that only read tables (the metrics and the figures) start quickly.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tinylens.tables import Schema, read_columns


def ablation_schema(n_blocks: int) -> Schema:
    """One row per (mode, prompt, context, variant); the distance of every block in one list."""
    return Schema("ablation", {
        "mode": pa.string(),  # prompt mode: corpus | heldout
        "prompt_id": pa.int32(),
        "split": pa.string(),  # tune | eval
        "context": pa.string(),  # full | one_token
        "variant": pa.string(),  # drop_sa | drop_ffwd
        "hellinger": pa.list_(pa.float64(), n_blocks),  # per block (0-based), vs the unmodified distribution
    })


def criterion_schema() -> Schema:
    """One row per (mode, prompt, block, subspace variant)."""
    return Schema("criterion", {
        "mode": pa.string(),
        "prompt_id": pa.int32(),
        "block": pa.int8(),  # 0-based
        "subspaces": pa.string(),  # end_of_model | same_stage
        "stage": pa.int8(),  # the stage whose subspaces rank the tokens
        "empty": pa.bool_(),  # no string above the block's tuned threshold: left out of the rates
        "unconverged": pa.bool_(),  # a top token's subspace did not converge: left out of the rates
        "top_n": pa.int16(),  # tokens holding > 90% of the truncated approximation
        "top_tokens": pa.string(),  # those tokens, most likely first
        "holds_abs": pa.bool_(),  # criterion with ranks by |cos|
        "holds_signed": pa.bool_(),  # criterion with ranks by the signed cosine
    })


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


ENDPOINT_SCHEMA = Schema("feed-forward-only endpoint", {
    "mode": pa.string(),
    "prompt_id": pa.int32(),
    "cosine": pa.float64(),  # cos(f, x_7), f = x_1 + sum_b ffwd_b
    "norm_ratio": pa.float64(),  # |f| / |x_7|
    "final_norm": pa.float64(),  # |x_7|
    "hellinger": pa.float64(),  # H(softmax(lm_head(ln_f(f))), the model's distribution)
    "sa_cosine": pa.float64(),  # cos(a, x_7), a = x_1 + sum_b sa_b: the attention-only endpoint
    "sa_norm_ratio": pa.float64(),  # |a| / |x_7|
    "sa_hellinger": pa.float64(),  # H(softmax(lm_head(ln_f(a))), the model's distribution)
})


CONTRIBUTIONS_SCHEMA = Schema("attention and feed-forward per block", {
    "mode": pa.string(),
    "prompt_id": pa.int32(),
    "block": pa.int8(),  # 0-based
    "sa_norm": pa.float64(),  # |sa_b|, last position
    "ffwd_norm": pa.float64(),  # |ffwd_b|
    "norm_ratio": pa.float64(),  # |ffwd_b| / |sa_b| (inf when sa_b = 0)
    "cos_ffwd_sa": pa.float64(),  # cos(ffwd_b, sa_b)
    "cos_ffwd_out": pa.float64(),  # cos(ffwd_b, out_b), out_b = x_b + sa_b + ffwd_b
    "cos_sa_out": pa.float64(),  # cos(sa_b, out_b)
})


def tokens_schema(n_singular: int) -> Schema:
    """One row per (stage, token)."""
    return Schema("token subspaces", {
        "stage": pa.int8(),  # residual stream entering block `stage`; n_layer = the input of ln_f
        "token_id": pa.int16(),
        "token": pa.string(),
        "reached": pa.bool_(),  # the joint test passed within the step budget
        "stopped_step": pa.int32(),  # steps taken when it passed; -1 if it never did
        "plateau_step": pa.int32(),  # steps taken when its joint NLL stopped improving (plateau rule); -1 if never
        "converged": pa.bool_(),  # reached, or stopped on the plateau rule: the criterion uses only these
        "joint_nll": pa.float64(),  # mean NLL over the K samples at the end
        "samples_reached": pa.int32(),  # samples whose own NLL is below the target at the end
        "singular": pa.list_(pa.float64(), n_singular),  # uncentred, descending
        "singular_centred": pa.list_(pa.float64(), n_singular),
        "sigma_ratio": pa.float64(),  # sigma_1 / sigma_2, uncentred (inf when sigma_2 = 0)
        "sigma_ratio_centred": pa.float64(),
        "median_norm": pa.float64(),  # median norm of the samples
        "negative_share": pa.float64(),  # samples with a negative cosine with the aligned direction
        "self_probability": pa.float64(),  # p(token | direction at the median norm)
    })


def mixtures_schema(vocab_size: int) -> Schema:
    """One row per (stage, configured pair): the distribution of ``v_a + v_b``."""
    return Schema("token mixtures", {
        "stage": pa.int8(),
        "token_a": pa.string(),
        "token_b": pa.string(),
        "distribution": pa.list_(pa.float64(), vocab_size),
    })


def load_subspace_tokens(path: str | Path) -> dict[str, np.ndarray]:
    """A per-token subspace table (:func:`tokens_schema`), checked.
    The width of its singular-value lists (``min(K, d_model)``) is read from the file itself."""
    width = 1
    try:
        found = pq.read_schema(path).field("singular").type
        width = found.list_size if isinstance(found, pa.FixedSizeListType) else width
    except (OSError, KeyError, pa.ArrowInvalid):
        pass  # read_table says what is wrong with the file: missing, truncated, other columns
    return read_columns(path, tokens_schema(width))


def robustness_schema(variant_names) -> Schema:
    """Per evaluation prompt of the robustness comparison (method.md §7): its end position in the validation
    text and each variant's Hellinger distance, approximation vs model (``hellinger_<variant>``)."""
    return Schema("robustness of the approximation", {
        "end": pa.int64(),  # exclusive end of the prompt's windows in the validation text
        **{f"hellinger_{name}": pa.float64() for name in variant_names},
    })


def check_config(preset: Mapping, config: Mapping, where: str) -> list[str]:
    """What the schema cannot say of the ``supporting`` section for the preset at ``where`` (``presets.<name>``):
    every subspace stage in ``0..n_layer`` and ``n_layer`` (the input of ln_f, which the criterion's
    end-of-model variant needs) among them; the robustness comparison's string lengths within the context."""
    n_layer, context = preset["model"]["n_layer"], preset["model"]["block_size"]
    stages = [int(s) for s in config["supporting"]["subspace_stages"]]
    problems = []
    if any(not 0 <= s <= n_layer for s in stages) or n_layer not in stages:
        problems.append(f"config key 'supporting.subspace_stages' is {stages}: every stage must lie in 0..{n_layer} "
                        f"(the input of block s, 0-based; {n_layer} = the input of ln_f, '{where}.model.n_layer') "
                        f"and {n_layer} must be among them")
    too_long = [n for n in config["supporting"]["robustness"]["lengths"] if n > context]
    if too_long:
        problems.append(f"config key 'supporting.robustness.lengths' has {too_long}, longer than the context "
                        f"('{where}.model.block_size' = {context}); use lengths of at most {context}")
    return problems
