"""Our trained models in TransformerLens 4 (``pip install -e ".[tl]"``).

TransformerLens 4 builds a :class:`~transformer_lens.model_bridge.TransformerBridge` around
its native transformer from a ``TransformerBridgeConfig``; its checkpoint converter reads a
state dict in the legacy ``HookedTransformer`` layout (per-head ``W_Q [n_heads d_model d_head]``
and so on, row-vector convention). Our model is that standard transformer: learned
position embeddings, pre-LayerNorm, ReLU MLP of width ``4 d_model``, an untied unembedding
with a bias, scores scaled by ``1/sqrt(d_head)``, no BOS token. So the export is a
relabelling of the same numbers: :func:`legacy_state_dict` splits our fused ``qkv`` per head
(the query/key/value biases ours lack are zero), TransformerLens converts it to the
bridge layout and loads it with ``strict=True``.

>>> from tinylens.export import to_transformer_lens          # doctest: +SKIP
>>> bridge = to_transformer_lens("results/small/models/seed1337")
>>> logits, cache = bridge.run_with_cache("ROMEO:\\nWhat say")
>>> cache["blocks.3.hook_mlp_out"][0, -1]   # our blocks.3.ffwd_out at the last position

The hook names of both sides are in :data:`HOOK_NAMES`. ``tinylens export`` writes a
folder that TransformerLens loads without tinylens (see :func:`export`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from tinylens.core.corpus import CharTokenizer
from tinylens.interventions import head_weights
from tinylens.model import ModelConfig, Transformer
from tinylens.weights import load_model, save_tensors

if TYPE_CHECKING:  # the optional dependency is imported only when a function needs it
    from transformer_lens.model_bridge import TransformerBridge

TOKENIZER_FILE = "tokenizer.json"
INSTALL_HINT = 'TransformerLens is not installed: pip install -e ".[tl]" (or pip install "transformer-lens>=4.3,<5")'

#: Our hook point (``tinylens.interventions``) -> the TransformerLens 4 hook holding the same
#: tensor. ``{b}`` is the block. TransformerLens puts ``pos`` before ``n_heads`` in q/k/v/z
#: (``[batch pos n_heads d_head]``, ours ``[batch n_heads pos d_head]``); ``embed`` is the sum
#: of the two TransformerLens embedding hooks; every other pair is the same tensor.
HOOK_NAMES: dict[str, str] = {
    "embed": "hook_embed + hook_pos_embed",
    "blocks.{b}.block_input": "blocks.{b}.hook_resid_pre",
    "blocks.{b}.q": "blocks.{b}.attn.hook_q",
    "blocks.{b}.k": "blocks.{b}.attn.hook_k",
    "blocks.{b}.v": "blocks.{b}.attn.hook_v",
    "blocks.{b}.attn_pattern": "blocks.{b}.attn.hook_pattern",
    "blocks.{b}.z": "blocks.{b}.attn.hook_z",
    "blocks.{b}.sa_out": "blocks.{b}.hook_attn_out",
    "blocks.{b}.resid_mid": "blocks.{b}.hook_resid_mid",
    "blocks.{b}.ffwd_out": "blocks.{b}.hook_mlp_out",
    "blocks.{b}.block_output": "blocks.{b}.hook_resid_post",
    "ln_f_input": "ln_final.hook_in",
    "ln_f_output": "ln_final.hook_out",
    "logits": "unembed.hook_out",
}

#: Hooks whose TransformerLens tensor is ours with the ``pos`` and ``n_heads`` axes swapped.
HEAD_AXIS_SWAPPED = ("q", "k", "v", "z")


def bridge_config(cfg: ModelConfig) -> dict[str, Any]:
    """The ``TransformerBridgeConfig`` keyword arguments of a model of shape ``cfg`` (JSON-able)."""
    return {
        "d_model": cfg.d_model,
        "d_head": cfg.d_head,
        "n_heads": cfg.n_head,
        "n_layers": cfg.n_layer,
        "n_ctx": cfg.block_size,
        "d_vocab": cfg.vocab_size,
        "d_mlp": 4 * cfg.d_model,
        "act_fn": "relu",
        "normalization_type": "RMS" if cfg.norm == "rmsnorm" else "LN",
        "eps": 1e-5,  # torch.nn.LayerNorm's default, which model.py uses (and gives its RMSNorm)
        "positional_embedding_type": "standard",
        "architecture": "TransformerLensNative",
        "model_name": "tinylens",
        # Character tokens, trained without a BOS token: never prepend one.
        "tokenizer_prepends_bos": False,
        "default_prepend_bos": False,
        "init_weights": False,  # every weight is loaded right after
    }


@torch.no_grad()
def legacy_state_dict(model: Transformer) -> dict[str, Tensor]:
    """``model``'s weights in the ``HookedTransformer`` layout (row vectors, per-head blocks).

    ``W_Q/W_K/W_V [n_heads d_model d_head]``, ``W_O [n_heads d_head d_model]`` (from
    :func:`tinylens.interventions.head_weights`), ``W_in [d_model d_mlp]``,
    ``W_out [d_mlp d_model]``, ``W_U [d_model vocab]``; ``b_Q/b_K/b_V`` are zero (our
    ``qkv`` has no bias). The scores' ``1/sqrt(d_head)`` is not folded into any weight:
    TransformerLens applies it, as our attention does. An RMSNorm model's norms have a gain and no bias
    (TransformerLens's ``RMS``); a tied model's ``W_U`` is its ``W_E`` transposed.
    """
    cfg = model.config
    s = {k: v.detach().to("cpu", torch.float32) for k, v in model.state_dict().items()}
    zero_bias = torch.zeros(cfg.n_head, cfg.d_head)
    out = {"embed.W_E": s["tok_emb.weight"], "pos_embed.W_pos": s["pos_emb.weight"]}
    for b in range(cfg.n_layer):
        p, heads = f"blocks.{b}.", head_weights(model, b)
        out |= {
            p + "ln1.w": s[p + "ln1.weight"],
            p + "attn.W_Q": heads.W_Q.float(),
            p + "attn.W_K": heads.W_K.float(),
            p + "attn.W_V": heads.W_V.float(),
            p + "attn.W_O": heads.W_O.float(),
            p + "attn.b_Q": zero_bias.clone(),
            p + "attn.b_K": zero_bias.clone(),
            p + "attn.b_V": zero_bias.clone(),
            p + "attn.b_O": heads.b_O.float(),
            p + "ln2.w": s[p + "ln2.weight"],
            p + "mlp.W_in": s[p + "ffwd.net.0.weight"].T,
            p + "mlp.b_in": s[p + "ffwd.net.0.bias"],
            p + "mlp.W_out": s[p + "ffwd.net.2.weight"].T,
            p + "mlp.b_out": s[p + "ffwd.net.2.bias"],
        }
    out |= {
        "ln_final.w": s["ln_f.weight"],
        "unembed.W_U": s["lm_head.weight"].T,
        "unembed.b_U": s["lm_head.bias"],
    }
    if cfg.norm == "layernorm":  # RMSNorm has no bias
        out |= {f"blocks.{b}.{ln}.b": s[f"blocks.{b}.{ln}.bias"] for b in range(cfg.n_layer) for ln in ("ln1", "ln2")}
        out["ln_final.b"] = s["ln_f.bias"]
    return {k: v.contiguous() for k, v in out.items()}


def _import_transformer_lens():
    try:
        from transformer_lens.config import TransformerBridgeConfig
        from transformer_lens.model_bridge.sources.native import boot
        from transformer_lens.utilities.tl_checkpoint_conversion import convert_tl_checkpoint
    except ImportError as err:
        raise ImportError(f"{INSTALL_HINT} ({err})") from None
    return TransformerBridgeConfig, boot, convert_tl_checkpoint


def hf_tokenizer(tokenizer: CharTokenizer):
    """A Hugging Face fast tokenizer with our character vocabulary (one token per character,
    same ids), so TransformerLens's string methods (``to_tokens``, ``run_with_cache("text")``,
    ``generate``) work."""
    try:
        from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
        from transformers import PreTrainedTokenizerFast
    except ImportError as err:
        raise ImportError(f"{INSTALL_HINT} ({err})") from None
    fast = Tokenizer(models.WordLevel({ch: i for i, ch in enumerate(tokenizer.vocab)}, unk_token=None))
    fast.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")  # every character
    fast.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=fast, clean_up_tokenization_spaces=False)


def bridge_from_model(model: Transformer, tokenizer: CharTokenizer | None = None,
                      device: str | torch.device = "cpu") -> TransformerBridge:
    """A TransformerLens ``TransformerBridge`` computing what ``model`` computes, in eval mode."""
    TransformerBridgeConfig, boot, convert_tl_checkpoint = _import_transformer_lens()
    cfg = TransformerBridgeConfig(**bridge_config(model.config), device=str(device))
    bridge = boot(cfg, tokenizer=hf_tokenizer(tokenizer) if tokenizer is not None else None)
    converted = convert_tl_checkpoint(legacy_state_dict(model), bridge.cfg)
    bridge.load_state_dict(converted, strict=True)
    return bridge.to(device).eval()


def to_transformer_lens(model_dir: str | Path, device: str | torch.device = "cpu") -> TransformerBridge:
    """Load a trained model folder (``model.safetensors``, ``config.json``, ``tokenizer.json``,
    as the train rule writes them) as a TransformerLens 4 ``TransformerBridge``.

    The bridge takes token ids ``[batch pos]`` or strings (our character tokenizer, no BOS);
    ``bridge.run_with_cache(...)`` returns logits ``[batch pos vocab]`` and a cache keyed by
    the TransformerLens hook names of :data:`HOOK_NAMES`.
    """
    model_dir = Path(model_dir)
    model = load_model(model_dir)
    tokenizer_path = model_dir / TOKENIZER_FILE
    tokenizer = CharTokenizer.load(tokenizer_path) if tokenizer_path.exists() else None
    return bridge_from_model(model, tokenizer, device=device)


def export(model_dir: str | Path, out_dir: str | Path, check_text: str | None = None) -> dict[str, Any]:
    """Write a folder TransformerLens loads without tinylens, and check it against our model.

    ``out_dir`` gets ``model.safetensors`` (the bridge's own state dict),
    ``tl_config.json`` (``TransformerBridgeConfig`` keyword arguments) and the Hugging Face
    tokenizer files. Returns (and writes as ``export_check.json``) the max abs difference
    of the reloaded bridge's logits from ours on ``check_text`` (the first ``n_ctx``
    characters of a sample of the vocabulary if not given).
    """
    from tinylens.atomic import write_json

    model_dir, out_dir = Path(model_dir), Path(out_dir)
    model = load_model(model_dir)
    tokenizer = CharTokenizer.load(model_dir / TOKENIZER_FILE)
    bridge = bridge_from_model(model, tokenizer)
    out_dir.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in bridge.state_dict().items()}
    save_tensors(out_dir / "model.safetensors", state, metadata={"format": "pt", "source": str(model_dir)})
    write_json(out_dir / "tl_config.json", bridge_config(model.config))
    hf_tokenizer(tokenizer).save_pretrained(str(out_dir))

    reloaded = load_exported(out_dir)
    text = check_text or (tokenizer.vocab * model.config.block_size)[: model.config.block_size]
    ids = torch.from_numpy(tokenizer.encode(text).astype("int64"))[None]
    with torch.no_grad():
        ours, _ = model(ids)
        theirs = reloaded.to_tokens(text)
        tl_logits = reloaded(theirs)
    if not torch.equal(theirs.cpu(), ids):
        raise RuntimeError(f"the exported tokenizer in {out_dir} encodes {text[:20]!r}... differently from ours")
    check = {"model_dir": str(model_dir), "n_tokens": ids.shape[1],
             "max_abs_logit_difference": float((tl_logits - ours).abs().max())}
    write_json(out_dir / "export_check.json", check)
    return check


def load_exported(out_dir: str | Path, device: str | torch.device = "cpu") -> TransformerBridge:
    """Load a folder written by :func:`export`: the same few lines a TransformerLens user writes
    (``TransformerBridgeConfig(**json)``, ``boot_native``, ``load_state_dict(strict=True)``)."""
    TransformerBridgeConfig, boot, _ = _import_transformer_lens()
    from safetensors.torch import load_file
    from transformers import PreTrainedTokenizerFast

    out_dir = Path(out_dir)
    cfg = TransformerBridgeConfig(**json.loads((out_dir / "tl_config.json").read_text()), device=str(device))
    bridge = boot(cfg, tokenizer=PreTrainedTokenizerFast.from_pretrained(str(out_dir)))
    bridge.load_state_dict(load_file(str(out_dir / "model.safetensors")), strict=True)
    return bridge.to(device).eval()


def run(args: argparse.Namespace) -> int:
    """``tinylens export MODEL_DIR OUT_DIR`` (its arguments, checked before torch is imported:
    :mod:`tinylens.cli`): export a trained model for TransformerLens; exit status 2 without TransformerLens,
    1 when the logits differ by more than ``--tolerance``."""
    try:
        check = export(args.model_dir, args.out_dir)
    except ImportError as err:
        print(f"tinylens export: {err}", file=sys.stderr)
        return 2
    diff = check["max_abs_logit_difference"]
    print(f"wrote {args.out_dir}: model.safetensors, tl_config.json, tokenizer; "
          f"max abs logit difference from tinylens {diff:.2e} over {check['n_tokens']} tokens")
    if not diff <= args.tolerance:
        print(f"tinylens export: difference {diff:.2e} exceeds --tolerance {args.tolerance:g}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    from tinylens.wording import moved

    sys.exit(moved("python -m tinylens.export", "export"))
