"""TransformerLens export: the weight layout, the same numbers in TransformerLens, the command."""

import json
import os
import re

import numpy as np
import pytest
import torch

from tinylens.export import HEAD_AXIS_SWAPPED, HOOK_NAMES, legacy_state_dict
from tinylens.interventions import run
from tinylens.model import ModelConfig, Transformer

from conftest import TEST_SEEDS

SEEDS = TEST_SEEDS


def require_transformer_lens():
    """Skip where the optional extra is missing, but never in CI: .ci/run installs it."""
    try:
        import transformer_lens  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("CI must run the TransformerLens tests: .ci/run installs the 'tl' extra")
        pytest.skip('transformer-lens not installed (pip install -e ".[tl]")')


def tiny_model(seed=0, **options):
    torch.manual_seed(seed)
    model = Transformer(ModelConfig(vocab_size=7, block_size=8, d_model=12, n_layer=2, n_head=3, dropout=0.0,
                                    **options))
    with torch.no_grad():  # non-zero biases and LayerNorm affines, so a misplaced one shows
        for name, p in model.named_parameters():
            if "ln" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.3)
    return model.eval()


def layer_norm(x, w, b):
    return torch.nn.functional.layer_norm(x, x.shape[-1:], w, b)


def test_legacy_layout_reproduces_every_intermediate():
    """The HookedTransformer-layout weights, applied as row vectors per head, give our hooks."""
    model = tiny_model()
    cfg = model.config
    sd = legacy_state_dict(model)
    tokens = torch.tensor([[0, 3, 1, 6, 2, 5], [4, 4, 0, 1, 2, 3]])
    with torch.no_grad():
        trace = run(model, tokens, record=["*"])
    for b in range(cfg.n_layer):
        p = f"blocks.{b}."
        x = layer_norm(trace[p + "block_input"], sd[p + "ln1.w"], sd[p + "ln1.b"])
        for kind, key in (("q", "W_Q"), ("k", "W_K"), ("v", "W_V")):
            expected = torch.einsum("bpd,hde->bhpe", x, sd[p + "attn." + key]) + sd[p + "attn.b_" + key[-1]][:, None]
            torch.testing.assert_close(expected, trace[p + kind], atol=1e-6, rtol=0)
        sa = torch.einsum("bhpe,hed->bpd", trace[p + "z"], sd[p + "attn.W_O"]) + sd[p + "attn.b_O"]
        torch.testing.assert_close(sa, trace[p + "sa_out"], atol=1e-6, rtol=0)
        mid = layer_norm(trace[p + "resid_mid"], sd[p + "ln2.w"], sd[p + "ln2.b"])
        mlp = torch.relu(mid @ sd[p + "mlp.W_in"] + sd[p + "mlp.b_in"]) @ sd[p + "mlp.W_out"] + sd[p + "mlp.b_out"]
        torch.testing.assert_close(mlp, trace[p + "ffwd_out"], atol=1e-6, rtol=0)
    embed = sd["embed.W_E"][tokens] + sd["pos_embed.W_pos"][: tokens.shape[1]]
    torch.testing.assert_close(embed, trace["embed"], atol=0, rtol=0)
    final = layer_norm(trace["ln_f_input"], sd["ln_final.w"], sd["ln_final.b"])
    torch.testing.assert_close(final @ sd["unembed.W_U"] + sd["unembed.b_U"], trace.logits, atol=1e-6, rtol=0)
    assert all(not sd[f"blocks.{b}.attn.b_{k}"].any() for b in range(cfg.n_layer) for k in "QKV")


def tl_value(cache, ours_name, block=None):
    """The TransformerLens tensor of our hook point ``ours_name``, in our axis order."""
    pattern = next(k for k in HOOK_NAMES if k.replace("blocks.{b}.", f"blocks.{block}.") == ours_name)
    theirs = HOOK_NAMES[pattern].replace("{b}", str(block))
    if " + " in theirs:
        return sum(cache[t] for t in theirs.split(" + "))
    value = cache[theirs]
    return value.transpose(1, 2) if ours_name.rsplit(".", 1)[-1] in HEAD_AXIS_SWAPPED else value


def test_every_mapped_hook_holds_our_tensor():
    require_transformer_lens()
    from tinylens.export import bridge_from_model

    model = tiny_model(1)
    bridge = bridge_from_model(model)
    tokens = torch.tensor([[0, 3, 1, 6, 2, 5, 1, 1], [4, 4, 0, 1, 2, 3, 6, 0]])
    with torch.no_grad():
        logits, cache = bridge.run_with_cache(tokens)
        trace = run(model, tokens, record=["*"])
    torch.testing.assert_close(logits, trace.logits, atol=1e-5, rtol=0)
    checked = 0
    for name, ours in trace.cache.items():
        block = int(name.split(".")[1]) if name.startswith("blocks.") else None
        torch.testing.assert_close(tl_value(cache, name, block), ours, atol=1e-5, rtol=0, msg=name)
        checked += 1
    assert checked == 4 + 10 * model.config.n_layer


@pytest.mark.parametrize("options", [{"tie_embeddings": True}, {"norm": "rmsnorm"}])
def test_the_variant_models_export_to_transformer_lens(options):
    """A tied model's W_U is its W_E; an RMSNorm model's norms are TransformerLens's RMS (gain, no bias)."""
    require_transformer_lens()
    from tinylens.export import bridge_from_model

    model = tiny_model(2, **options)
    sd = legacy_state_dict(model)
    if "norm" in options:
        assert "ln_final.b" not in sd and "blocks.0.ln1.b" not in sd
    else:
        torch.testing.assert_close(sd["unembed.W_U"], sd["embed.W_E"].T, atol=0, rtol=0)
    bridge = bridge_from_model(model)
    tokens = torch.tensor([[0, 3, 1, 6, 2, 5, 1, 1], [4, 4, 0, 1, 2, 3, 6, 0]])
    with torch.no_grad():
        torch.testing.assert_close(bridge(tokens), model(tokens)[0], atol=1e-5, rtol=0)


@pytest.mark.workflow
def test_trained_models_match_in_transformer_lens(finished_run):
    """Each test-preset model: TransformerLens logits within 1e-4 of ours, and its cached
    hook_resid_pre / hook_attn_out / hook_mlp_out equal our Parquet dumps of the prompts."""
    require_transformer_lens()
    from tinylens.core.activations import load_block, load_logits
    from tinylens.core.corpus import CharTokenizer
    from tinylens.core.strings import load_prompts
    from tinylens.export import to_transformer_lens
    from tinylens.weights import load_model

    worst = {}
    for seed in SEEDS:
        model_dir = finished_run / f"models/seed{seed}"
        bridge = to_transformer_lens(model_dir)
        model = load_model(model_dir)
        tokenizer = CharTokenizer.load(model_dir / "tokenizer.json")
        diffs = []
        for mode in ("corpus", "heldout"):
            prompts = load_prompts(finished_run / f"strings/prompts_{mode}.parquet")["string"]
            tokens = torch.from_numpy(np.stack([tokenizer.encode(s) for s in prompts]).astype(np.int64))
            assert torch.equal(bridge.to_tokens(list(prompts)), tokens)  # the string path: no BOS, same ids
            with torch.no_grad():
                logits, cache = bridge.run_with_cache(tokens)
                ours = model(tokens)[0]
            diffs.append(float((logits - ours).abs().max()))
            assert diffs[-1] < 1e-4, (seed, mode, diffs[-1])
            dumps = finished_run / f"activations/seed{seed}/prompts_{mode}"
            np.testing.assert_allclose(load_logits(dumps, 65), logits[:, -1].numpy(), atol=1e-4, rtol=0)
            for b in range(model.config.n_layer):
                for kind, hook in (("block_input", "hook_resid_pre"), ("sa_out", "hook_attn_out"),
                                   ("ffwd_out", "hook_mlp_out")):
                    dumped = load_block(dumps, b, kind, model.config.d_model, strings=prompts)
                    np.testing.assert_allclose(dumped, cache[f"blocks.{b}.{hook}"][:, -1].numpy(), atol=1e-5,
                                               rtol=0, err_msg=f"seed {seed} {mode} block {b} {kind}")
        worst[seed] = max(diffs)
    print("max abs logit difference from TransformerLens per seed:", worst)


@pytest.mark.workflow
def test_export_command_writes_a_folder_transformer_lens_loads(finished_run, tmp_path):
    require_transformer_lens()
    from tinylens.cli import main
    from tinylens.core.corpus import CharTokenizer
    from tinylens.export import load_exported
    from tinylens.weights import load_model

    model_dir, out = finished_run / "models/seed1337", tmp_path / "tl"
    assert main(["export", str(model_dir), str(out)]) == 0
    check = json.loads((out / "export_check.json").read_text())
    assert check["max_abs_logit_difference"] < 1e-4
    bridge = load_exported(out)  # TransformerLens alone: config JSON, boot_native, strict load
    text = "ROMEO:\nWhat say you, my lord?"
    ids = torch.from_numpy(CharTokenizer.load(model_dir / "tokenizer.json").encode(text).astype(np.int64))[None]
    with torch.no_grad():
        torch.testing.assert_close(bridge(text), load_model(model_dir)(ids)[0], atol=1e-4, rtol=0)
    with pytest.raises(SystemExit) as stop:  # not a model folder: a usage error naming it
        main(["export", str(tmp_path), str(tmp_path / "x")])
    assert stop.value.code == 2


def test_readme_table_lists_every_hook_mapping(repo):
    section = (repo / "docs/transformerlens.md").read_text(encoding="utf-8").split("<!-- tl-hooks -->")[1]
    rows = re.findall(r"^\| `([^`]+)` \| `([^`]+)`(?: \+ `([^`]+)`)? \|", section, flags=re.M)
    documented = {ours: theirs + (f" + {extra}" if extra else "") for ours, theirs, extra in rows}
    assert documented == HOOK_NAMES
