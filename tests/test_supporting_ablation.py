"""Ablation (appendix IV), both variants: the full-context one and the paper's one-token continuation
(issue 17.2), checked against forward passes written out by hand with the model's own modules."""

import numpy as np
import pytest
import torch

from tinylens.measures import hellinger
from tinylens.model import ModelConfig, Transformer
from tinylens.supporting.ablation import ablation_distances, ablation_rows
from tinylens.supporting.schemas import ablation_schema
from tinylens.supporting.summary import summarize_ablation
from tinylens.tables import read_table, write_table

N_LAYER = 3


def make_model(seed=0):
    torch.manual_seed(seed)
    m = Transformer(ModelConfig(vocab_size=11, block_size=12, d_model=16, n_layer=N_LAYER, n_head=4, dropout=0.0))
    with torch.no_grad():  # weights well above the 0.02 init, so every term matters
        for p in m.parameters():
            p.mul_(10.0) if p.dim() > 1 else p.add_(0.3 * torch.randn_like(p))
    return m.eval()


@pytest.fixture(scope="module")
def model():
    return make_model()


@pytest.fixture(scope="module")
def tokens():
    return torch.randint(0, 11, (7, 8), generator=torch.Generator().manual_seed(1))


def alone_after(model, v, block):
    """The last position of ``v`` alone through the blocks after ``block``, ln_f and lm_head."""
    v = v[:, -1:]
    for later in model.blocks[block + 1 :]:
        v = later(v)
    return torch.softmax(model.unembed(v)[:, -1].double(), -1)


def by_hand(model, tokens, block, drop, one_token):
    """The ablation written out with the model's modules, no hooks: the reference."""
    with torch.no_grad():
        x = model.embed(tokens)
        for b, blk in enumerate(model.blocks):
            sa = blk.sa(blk.ln1(x))[0]
            ffwd = blk.ffwd(blk.ln2(x + sa))
            out = x + sa + ffwd
            if b == block:
                edited = x + ffwd if drop == "drop_sa" else x + sa
                if one_token:
                    return hellinger(alone_after(model, edited, b), alone_after(model, out, b)).numpy()
                out = edited
            x = out
        q = torch.softmax(model(tokens)[0][:, -1].double(), -1)
        return hellinger(torch.softmax(model.unembed(x)[:, -1].double(), -1), q).numpy()


def test_both_variants_match_the_forward_pass_written_by_hand(model, tokens):
    h = ablation_distances(model, tokens, batch_size=3)  # batches that split the prompts unevenly
    for (context, variant), values in h.items():
        assert values.shape == (7, N_LAYER)
        for b in range(N_LAYER):
            expected = by_hand(model, tokens, b, variant, context == "one_token")
            np.testing.assert_allclose(values[:, b], expected, atol=2e-6, err_msg=f"{context} {variant} block {b}")
        assert (values[:, 0] > 1e-3).all(), f"{context} {variant}: dropping a term of block 1 must matter"


def test_the_variants_agree_for_the_last_block_and_differ_for_the_first(model, tokens):
    h = ablation_distances(model, tokens)
    for variant in ("drop_sa", "drop_ffwd"):
        full, alone = h[("full", variant)], h[("one_token", variant)]
        np.testing.assert_allclose(alone[:, -1], full[:, -1], atol=1e-9)
        assert np.abs(alone[:, 0] - full[:, 0]).min() > 1e-3, variant


def test_dropping_the_attention_of_a_block_whose_attention_is_zeroed_changes_nothing(tokens):
    model = make_model(seed=3)
    with torch.no_grad():  # block 1's attention writes exactly zero
        model.blocks[1].sa.proj.weight.zero_()
        model.blocks[1].sa.proj.bias.zero_()
    h = ablation_distances(model, tokens)
    for context in ("full", "one_token"):
        assert np.abs(h[(context, "drop_sa")][:, 1]).max() < 1e-6
        assert (h[(context, "drop_sa")][:, 0] > 1e-3).all()  # an intact block still matters
        assert (h[(context, "drop_ffwd")][:, 1] > 1e-3).all()


def test_rows_round_trip_through_the_table_and_summarise_per_seed(model, tokens, tmp_path):
    h = ablation_distances(model, tokens)
    rows = ablation_rows("corpus", range(7), ["tune"] * 3 + ["eval"] * 4, h)
    path = tmp_path / "ablation.parquet"
    write_table(path, ablation_schema(N_LAYER), rows)
    t = read_table(path, ablation_schema(N_LAYER))
    assert t.num_rows == 7 * 4
    cols = {k: np.asarray(v) for k, v in t.to_pydict().items()}
    other = {**cols, "hellinger": cols["hellinger"] * 2}
    s = summarize_ablation({1337: cols, 88: other})["corpus"]["full"]["drop_sa"]
    mean = h[("full", "drop_sa")].mean(0)
    np.testing.assert_allclose(s["per_seed"]["1337"]["mean"], mean, atol=1e-6)
    np.testing.assert_allclose(s["mean"], 1.5 * mean, atol=1e-6)
    np.testing.assert_allclose(s["seed_min"], mean, atol=1e-6)
    np.testing.assert_allclose(s["seed_max"], 2 * mean, atol=1e-6)


def test_the_larger_impact_is_a_paired_test_per_block_over_the_seeds():
    """d = H(drop_ffwd) - H(drop_sa) on the same prompts, paired by prompt id (rows in any order); per seed its
    mean over prompts, per block the t-test of the seeds' means: a block whose seeds disagree is no different."""
    from tinylens.supporting.summary import ablation_differences

    rng = np.random.default_rng(0)
    prompts = 50

    def table(shift: float) -> dict:
        rows = {k: [] for k in ("mode", "prompt_id", "split", "context", "variant", "hellinger")}
        for variant in ("drop_sa", "drop_ffwd"):
            ids = rng.permutation(prompts)  # the two variants' rows in different orders
            h = np.empty((prompts, 2))
            # block 0: a per-prompt level both variants share, the feed-forward 0.005 above it: only the pairing
            # by prompt id makes that difference stand out of the levels' spread
            h[:, 0] = 0.01 * ids + (0.005 if variant == "drop_ffwd" else 0.0) + rng.normal(0, 1e-4, prompts)
            h[:, 1] = 0.1 + (shift if variant == "drop_ffwd" else 0.0) + rng.normal(0, 0.01, prompts)
            rows["mode"] += ["paper"] * prompts
            rows["prompt_id"] += list(ids)
            rows["split"] += ["eval"] * prompts
            rows["context"] += ["one_token"] * prompts
            rows["variant"] += [variant] * prompts
            rows["hellinger"] += list(h)
        return {k: np.asarray(v) for k, v in rows.items()}

    got = ablation_differences({1: table(0.02), 2: table(-0.02), 3: table(0.01)})["paper"]["one_token"]
    assert [r["block"] for r in got] == [0, 1]
    first, second = (r["over_seeds"] for r in got)
    assert got[0]["per_seed"]["1"]["direction"] == "above" and got[0]["per_seed"]["1"]["p"] < 1e-10
    assert first["direction"] == "above" and first["mean"] == pytest.approx(0.005, abs=1e-4) and first["n"] == 3
    assert got[1]["per_seed"]["1"]["direction"] == "above" and got[1]["per_seed"]["2"]["direction"] == "below"
    assert second["direction"] == "same"  # the seeds straddle 0: inside the seeds' spread
