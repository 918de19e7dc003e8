"""The intervention API: recording, edits, starting from a residual, per-head weights."""

import pytest
import torch

from tinylens.interventions import (
    all_hook_names,
    direct_logits,
    drop_attention,
    drop_feedforward,
    head_outputs,
    head_weights,
    hook_name,
    replace,
    run,
    run_in_batches,
    scale,
)
from tinylens.model import ModelConfig, Transformer


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    m = Transformer(ModelConfig(vocab_size=11, block_size=12, d_model=16, n_layer=3, n_head=4, dropout=0.0)).eval()
    # Non-trivial biases and LayerNorm gains so that no check passes by accident of the init.
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("bias") or "ln" in name:
                p.add_(0.1 * torch.randn_like(p))
    return m


@pytest.fixture(scope="module")
def tokens():
    return torch.randint(0, 11, (5, 9), generator=torch.Generator().manual_seed(1))


def test_run_without_edits_is_the_model(model, tokens):
    with torch.no_grad():
        expected, _ = model(tokens)
        trace = run(model, tokens, record=["*"])
    torch.testing.assert_close(trace.logits, expected, rtol=0, atol=1e-6)
    assert set(trace.cache) == set(all_hook_names(3))
    torch.testing.assert_close(trace["ln_f_input"], trace["blocks.2.block_output"])
    # Every block's identity: out = x + sa_out + ffwd_out.
    for b in range(3):
        parts = trace[hook_name(b, "block_input")] + trace[hook_name(b, "sa_out")] + trace[hook_name(b, "ffwd_out")]
        torch.testing.assert_close(trace[hook_name(b, "block_output")], parts)


def test_starting_from_a_recorded_residual_reproduces_the_logits(model, tokens):
    with torch.no_grad():
        full = run(model, tokens, record=["blocks.*.block_input"])
        for b in range(3):
            resumed = run(model, resid=full[hook_name(b, "block_input")], start=b)
            torch.testing.assert_close(resumed.logits, full.logits, rtol=0, atol=1e-6)
        final = run(model, resid=full.logits.new_zeros(5, 9, 16) + 1.0, start=3)
    assert final.logits.shape == (5, 9, 11)


def test_last_only_keeps_the_last_position(model, tokens):
    with torch.no_grad():
        full = run(model, tokens, record=["blocks.*.ffwd_out", "blocks.0.attn_pattern"])
        last = run(model, tokens, record=["blocks.*.ffwd_out", "blocks.0.attn_pattern"], last_only=True)
    torch.testing.assert_close(last.logits, full.logits[:, -1])
    torch.testing.assert_close(last.stacked("ffwd_out"), full.stacked("ffwd_out")[:, :, -1])
    torch.testing.assert_close(last["blocks.0.attn_pattern"], full["blocks.0.attn_pattern"][:, :, -1])


def test_attention_internals_are_consistent_with_the_weights(model, tokens):
    with torch.no_grad():
        trace = run(model, tokens, record=["blocks.1.*"])
        w = head_weights(model, 1)
        x = model.blocks[1].ln1(trace["blocks.1.block_input"])  # [batch pos d_model]
        q = torch.einsum("bpd,hde->bhpe", x, w.W_Q)
        torch.testing.assert_close(trace["blocks.1.q"], q, rtol=1e-5, atol=1e-6)
        pattern = trace["blocks.1.attn_pattern"]
        torch.testing.assert_close(pattern.sum(-1), torch.ones_like(pattern[..., 0]))
        assert torch.all(pattern.triu(1) == 0)  # causal
        per_head = head_outputs(model, 1, trace["blocks.1.z"])
        torch.testing.assert_close(per_head.sum(1) + w.b_O, trace["blocks.1.sa_out"], rtol=1e-5, atol=1e-6)
        # W_OV and W_QK are the products of the per-head factors.
        torch.testing.assert_close(w.W_OV[2], w.W_V[2] @ w.W_O[2])
        torch.testing.assert_close(w.W_QK[0], w.W_Q[0] @ w.W_K[0].T)


def test_dropping_a_term_that_is_zero_changes_nothing(model, tokens):
    zeroed = Transformer(model.config).eval()
    zeroed.load_state_dict(model.state_dict())
    with torch.no_grad():
        zeroed.blocks[1].sa.proj.weight.zero_()
        zeroed.blocks[1].sa.proj.bias.zero_()  # block 1's sa_out is exactly 0
        zeroed.blocks[2].ffwd.net[2].weight.zero_()
        zeroed.blocks[2].ffwd.net[2].bias.zero_()  # block 2's ffwd_out is exactly 0
        base = run(zeroed, tokens).logits
        assert torch.equal(run(zeroed, tokens, edits=drop_attention(1)).logits, base)
        assert torch.equal(run(zeroed, tokens, edits=drop_feedforward(2)).logits, base)
        # ... while on the real model both interventions change the output.
        real = run(model, tokens).logits
        assert (run(model, tokens, edits=drop_attention(1)).logits - real).abs().max() > 1e-3
        assert (run(model, tokens, edits=drop_feedforward(2)).logits - real).abs().max() > 1e-3


def test_drop_attention_keeps_what_the_feedforward_reads(model, tokens):
    with torch.no_grad():
        base = run(model, tokens, record=["blocks.1.*"])
        edited = run(model, tokens, edits=drop_attention(1), record=["blocks.1.*"])
    torch.testing.assert_close(edited["blocks.1.ffwd_out"], base["blocks.1.ffwd_out"])
    torch.testing.assert_close(edited["blocks.1.block_output"],
                               base["blocks.1.block_input"] + base["blocks.1.ffwd_out"])


def test_scaling_the_final_residual_leaves_ln_f_unchanged(model, tokens):
    with torch.no_grad():
        # The random model's residual is small enough that LayerNorm's eps shows at c = 1; compare
        # c = 10 with c = 1000, where only the eps term (1e-5 against a variance above 1e-2) differs.
        base = run(model, tokens, edits=scale("ln_f_input", 10.0), record=["ln_f_output"])
        scaled = run(model, tokens, edits=scale("ln_f_input", 1000.0), record=["ln_f_output"])
    torch.testing.assert_close(scaled["ln_f_output"], base["ln_f_output"], rtol=0, atol=1e-5)


def test_replace_and_gradients_flow(model):
    vector = torch.zeros(1, 1, 16, requires_grad=True)
    trace = run(model, resid=vector, start=2, edits=replace("blocks.2.sa_out", torch.ones(16)))
    trace.logits[0, 0, 3].backward()
    assert vector.grad is not None and vector.grad.abs().sum() > 0


def test_bad_requests_name_the_problem(model, tokens):
    with pytest.raises(ValueError, match="matches no hook point"):
        run(model, tokens, record=["blocks.*.mlp_out"])
    with pytest.raises(ValueError, match="unknown hook points"):
        run(model, tokens, edits={"blocks.9.sa_out": lambda v, s: v})
    with pytest.raises(ValueError, match="exactly one"):
        run(model)
    with pytest.raises(ValueError, match="start must be"):
        run(model, resid=torch.zeros(1, 1, 16), start=4)
    with pytest.raises(KeyError, match="was not recorded"):
        run(model, tokens)["blocks.0.sa_out"]


def test_direct_logits_of_every_term_sum_to_the_logits(model, tokens):
    """embed + every head's output + every proj bias + every ffwd_out = ln_f_input, and the direct
    logits of those terms, plus lm_head(ln_f.bias), are the model's logits."""
    with torch.no_grad():
        trace = run(model, tokens, record=["embed", "blocks.*.z", "blocks.*.ffwd_out", "ln_f_input"])
        final = trace["ln_f_input"]
        terms = [trace["embed"]]
        for b in range(3):
            terms += list(head_outputs(model, b, trace[hook_name(b, "z")]).unbind(1))
            terms += [head_weights(model, b).b_O.expand_as(final), trace[hook_name(b, "ffwd_out")]]
        torch.testing.assert_close(sum(terms), final, rtol=0, atol=1e-5)
        per_head = direct_logits(model, head_outputs(model, 1, trace["blocks.1.z"]), final)
        assert per_head.shape == (5, 4, 9, 11)
        total = sum(direct_logits(model, t, final) for t in terms) + model.lm_head(model.ln_f.bias)
        torch.testing.assert_close(total, trace.logits, rtol=0, atol=1e-5)
        torch.testing.assert_close(per_head.sum(1), direct_logits(model, sum(head_outputs(model, 1, trace["blocks.1.z"]).unbind(1)), final))
    with pytest.raises(ValueError, match="must be"):
        direct_logits(model, final[:, :3], final)


def test_a_run_in_batches_is_the_run_of_all_sequences(model, tokens):
    options = dict(record=["blocks.*.ffwd_out", "ln_f_input"], edits=scale(hook_name(1, "block_output"), 3.0))
    whole = run(model, tokens, **options, last_only=True)
    batched = run_in_batches(model, tokens, batch_size=2, **options, last_only=True)  # batches of 2, 2, 1
    assert torch.allclose(batched.logits, whole.logits, atol=1e-5) and batched.logits.shape == (5, 11)
    assert sorted(batched.cache) == sorted(whole.cache)
    for name, value in whole.cache.items():
        assert torch.allclose(batched[name], value, atol=1e-5), name
    resid = run(model, tokens, record=[hook_name(2, "block_input")])[hook_name(2, "block_input")]
    from_resid = run_in_batches(model, resid=resid, start=2, batch_size=3)
    assert torch.allclose(from_resid.logits, run(model, tokens).logits, atol=1e-5)
    with pytest.raises(ValueError, match="exactly one of tokens="):
        run_in_batches(model, batch_size=2)
