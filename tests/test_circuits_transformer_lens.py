"""Cross-check: our composition scores against TransformerLens's on the same weights.

TransformerLens 4 builds its own model (``TransformerBridge.boot_native``: pre-LayerNorm, learned
positions, ReLU MLP, no Hub access); our weights are copied into it, its logits are checked
against ours, then ``all_composition_scores`` is compared with our residual-basis scores, raw
and after its ``fold_ln`` processing. Skipped unless transformer_lens is installed.
"""

import pytest
import torch

from tinylens.circuits.composition import KINDS, basis_of, composition_scores, head_factors
from tinylens.interventions import run
from tinylens.model import ModelConfig, Transformer

tl_bridge = pytest.importorskip("transformer_lens.model_bridge")
pytest.importorskip("transformer_lens.model_bridge.sources.native")  # attaches TransformerBridge.boot_native


def our_model() -> Transformer:
    torch.manual_seed(0)
    m = Transformer(ModelConfig(vocab_size=13, block_size=10, d_model=16, n_layer=3, n_head=4, dropout=0.0)).eval()
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))
            if "ln" in name and name.endswith("weight"):
                p.mul_(1 + 0.3 * torch.randn_like(p))
            if name.endswith("weight") and "ln" not in name:
                p.mul_(10)
    return m


def bridge_of(model: Transformer):
    """A TransformerLens 4 bridge holding ``model``'s weights (lm_head's bias left out: TL's native
    head has none; the logits are compared without it)."""
    cfg = model.config
    bridge = tl_bridge.TransformerBridge.boot_native(dict(
        d_model=cfg.d_model, n_layers=cfg.n_layer, n_heads=cfg.n_head, d_head=cfg.d_head, d_mlp=4 * cfg.d_model,
        d_vocab=cfg.vocab_size, n_ctx=cfg.block_size, act_fn="relu", normalization_type="LN",
        positional_embedding_type="standard", eps=1e-5))
    native = bridge.original_model
    d = cfg.d_model
    with torch.no_grad():
        native.tok_embed.weight.copy_(model.tok_emb.weight)
        native.pos.weight.copy_(model.pos_emb.weight)
        for ours, theirs in zip(model.blocks, native.layers):
            for a, b in ((ours.ln1, theirs.ln1), (ours.ln2, theirs.ln2)):
                b.weight.copy_(a.weight)
                b.bias.copy_(a.bias)
            q, k, v = ours.sa.qkv.weight.split(d, dim=0)
            for lin, w in ((theirs.attn.q, q), (theirs.attn.k, k), (theirs.attn.v, v)):
                lin.weight.copy_(w)
                lin.bias.zero_()
            theirs.attn.o.weight.copy_(ours.sa.proj.weight)
            theirs.attn.o.bias.copy_(ours.sa.proj.bias)
            theirs.mlp.fc_in.weight.copy_(ours.ffwd.net[0].weight)
            theirs.mlp.fc_in.bias.copy_(ours.ffwd.net[0].bias)
            theirs.mlp.fc_out.weight.copy_(ours.ffwd.net[2].weight)
            theirs.mlp.fc_out.bias.copy_(ours.ffwd.net[2].bias)
        native.ln_out.weight.copy_(model.ln_f.weight)
        native.ln_out.bias.copy_(model.ln_f.bias)
        native.head.weight.copy_(model.lm_head.weight)
    return bridge


def ours_as_tl(model: Transformer, layernorm: str, kind: str) -> torch.Tensor:
    """Our scores in TL's layout ``[layer_A head_A layer_B head_B]``, zero where B is not later."""
    cfg = model.config
    s = composition_scores(head_factors(model, basis_of(model, "residual", layernorm)), kind)
    return torch.nan_to_num(s, nan=0.0).reshape(cfg.n_layer, cfg.n_head, cfg.n_layer, cfg.n_head)


@pytest.fixture(scope="module")
def pair():
    model = our_model()
    return model, bridge_of(model)


def test_the_bridge_computes_our_model(pair):
    model, bridge = pair
    tokens = torch.randint(0, 13, (2, 10), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ours = run(model, tokens).logits - model.lm_head.bias
        theirs = bridge(tokens)
    torch.testing.assert_close(theirs.float(), ours, rtol=1e-4, atol=1e-4)


def test_residual_scores_equal_transformer_lens(pair):
    model, bridge = pair
    for kind in KINDS:
        theirs = bridge.all_composition_scores(kind).scores.double()
        torch.testing.assert_close(theirs, ours_as_tl(model, "ignored", kind), rtol=1e-5, atol=1e-6, msg=kind)


def test_folded_scores_equal_transformer_lens_fold_ln(pair):
    """TL's fold_ln multiplies the reading weights by the gain and centres them; writers untouched
    (center_writing_weights off) - our LayerNorm-folded scores."""
    model, _ = pair
    bridge = bridge_of(model)
    bridge.enable_compatibility_mode(disable_warnings=True, fold_ln=True, center_writing_weights=False,
                                     center_unembed=False, fold_value_biases=False)
    for kind in KINDS:
        theirs = bridge.all_composition_scores(kind).scores.double()
        torch.testing.assert_close(theirs, ours_as_tl(model, "folded", kind), rtol=1e-5, atol=1e-6, msg=kind)
