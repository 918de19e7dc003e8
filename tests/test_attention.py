"""Attention dynamics (method.md §10): hand-built cases with known answers, then the family end to end."""

import json
import math

import numpy as np
import pytest
import torch

from tinylens import measures
from tinylens.attention import plots, probes, schemas, spectra, summary, trajectories
from tinylens.attention.tuned_lens import (
    LensTraining,
    TunedLens,
    load_lens,
    read_history,
    save_lens,
    train_tuned_lens,
    training_endpoints,
    write_history,
)
from tinylens.interventions import run
from tinylens.model import ModelConfig, Transformer


def random_causal(pos: int, n: int = 1, seed: int = 0) -> torch.Tensor:
    """``n`` random row-stochastic lower-triangular matrices ``[n pos pos]`` (float64)."""
    g = torch.Generator().manual_seed(seed)
    weights = torch.rand(n, pos, pos, generator=g, dtype=torch.float64).tril()
    return weights / weights.sum(-1, keepdim=True)


@pytest.fixture(scope="module")
def model() -> Transformer:
    torch.manual_seed(0)
    return Transformer(ModelConfig(vocab_size=11, block_size=12, d_model=16, n_layer=3, n_head=2, dropout=0.0)).eval()


# --- spectra ------------------------------------------------------------------------------------


def test_hand_built_causal_matrix_eigenvalues_are_its_diagonal():
    s = torch.tensor([[1.0, 0.0, 0.0, 0.0],
                      [0.3, 0.7, 0.0, 0.0],
                      [0.1, 0.5, 0.4, 0.0],
                      [0.25, 0.25, 0.3, 0.2]], dtype=torch.float64)
    gap, imag = spectra.eigenvalue_diagonal_gap(s)
    assert gap < 1e-12 and imag < 1e-12
    eig = torch.linalg.eigvals(s).real.sort().values
    torch.testing.assert_close(eig, torch.tensor([0.2, 0.4, 0.7, 1.0], dtype=torch.float64))
    assert spectra.causal_checks(s) == {"row_sum_max_error": 0.0, "above_diagonal_max": 0.0, "min_entry": 0.0}
    # a non-triangular matrix with the same diagonal has other eigenvalues: the check can fail
    leaky = s.clone()
    leaky[1, 2], leaky[1, 1] = 0.3, 0.4
    assert spectra.eigenvalue_diagonal_gap(leaky)[0] > 0.05
    assert spectra.causal_checks(leaky)["above_diagonal_max"] == pytest.approx(0.3)


def test_random_causal_matrices_eigenvalues_match_a_numerical_solver():
    gap, imag = spectra.eigenvalue_diagonal_gap(random_causal(10, n=5))
    assert gap.shape == (5,) and float(gap.max()) < 1e-8 and float(imag.max()) < 1e-8


def test_nearly_defective_causal_matrix_has_ill_conditioned_eigenvalues():
    # each position puts 0.99 on the previous one: a Jordan-like block of 19 equal eigenvalues 0.01
    s = torch.diag(torch.full((20,), 0.01, dtype=torch.float64)) + torch.diag(torch.full((19,), 0.99,
                                                                                       dtype=torch.float64), -1)
    s[0, 0] = 1.0
    assert spectra.causal_checks(s)["row_sum_max_error"] < 1e-15
    assert float(spectra.eigenvalue_diagonal_gap(s)[0]) > 1e-3  # the solver cannot resolve them


def test_two_position_walk_is_absorbed_at_the_known_rate():
    a = 0.8
    s = torch.tensor([[1.0, 0.0], [1 - a, a]], dtype=torch.float64)
    mass = spectra.absorption(s, n_doublings=5)  # [steps pos]
    steps = spectra.walk_steps(5)
    assert steps == [1, 2, 4, 8, 16, 32]
    torch.testing.assert_close(mass[:, 1], torch.tensor([1 - a**k for k in steps], dtype=torch.float64))
    torch.testing.assert_close(mass[:, 0], torch.ones(6, dtype=torch.float64))  # position 0 absorbs
    assert float(spectra.slowest_transient_eigenvalue(s)) == pytest.approx(a)
    # 1 - 0.8^k = 0.5 at k = log 0.5 / log 0.8 = 3.1; interpolation in log2 k between k = 2 and 4
    half = spectra.half_absorption_steps(steps, mass[:, 1].numpy())
    assert 2 < half < 4
    assert spectra.half_absorption_steps([1, 2], [0.1, 0.2]) == math.inf
    assert spectra.half_absorption_steps([1, 2], [0.6, 0.9]) == 1.0


def test_random_walk_is_absorbed_and_matches_matrix_powers():
    s = random_causal(6, n=3, seed=1)
    mass = spectra.absorption(s, n_doublings=6)
    for m, k in enumerate(spectra.walk_steps(6)):
        torch.testing.assert_close(mass[:, m], torch.linalg.matrix_power(s, k)[..., 0])
    assert bool((mass.diff(dim=1) >= -1e-12).all())  # absorbed mass never decreases
    torch.testing.assert_close(mass[:, -1], torch.ones(3, 6, dtype=torch.float64), atol=1e-6, rtol=0)


def test_score_split_sums_and_matches_a_least_squares_fit():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 7, 4, generator=g), torch.randn(2, 7, 4, generator=g)
    sums = spectra.score_sums_of_squares(q, k)
    torch.testing.assert_close(sums["distance"] + sums["key_norm"] + sums["cross"], sums["total"])
    for m in range(2):
        # the two terms written out: -|q_i - k_j|^2 / (2 sqrt(d)) and |k_j|^2 / (2 sqrt(d)), row-centred over j <= i
        qd, kd = q[m].double(), k[m].double()
        distance = -((qd[:, None] - kd[None]) ** 2).sum(-1) / (2 * 2.0)
        key_norm = (kd**2).sum(-1)[None].expand(7, 7) / (2 * 2.0)
        for name, term in (("distance", distance), ("key_norm", key_norm)):
            ss = sum(float(((term[i, : i + 1] - term[i, : i + 1].mean()) ** 2).sum()) for i in range(7))
            assert float(sums[name][m]) == pytest.approx(ss, rel=1e-10), name
        s = spectra.causal_scores(q[m], k[m]).numpy()
        rows, y = [], []
        for i in range(7):
            for j in range(i + 1):
                x = np.zeros(14)
                x[i], x[7 + j] = 1, 1
                rows.append(x)
                y.append(s[i, j])
        x, y = np.array(rows), np.array(y)
        rss_rows = ((y - x[:, :7] @ np.linalg.lstsq(x[:, :7], y, rcond=None)[0]) ** 2).sum()
        rss_both = ((y - x @ np.linalg.lstsq(x, y, rcond=None)[0]) ** 2).sum()
        assert float(sums["total"][m]) == pytest.approx(rss_rows, rel=1e-10)
        assert float(sums["key_effect"][m]) == pytest.approx(rss_rows - rss_both, rel=1e-8)


def test_score_split_extremes():
    g = torch.Generator().manual_seed(1)
    k = torch.randn(6, 4, generator=g)
    same_query = torch.randn(1, 4, generator=g).expand(6, 4)  # scores depend on the key alone
    sums = spectra.score_sums_of_squares(same_query, k)
    assert float(sums["key_effect"] / sums["total"]) == pytest.approx(1.0)
    unit_keys = k / k.norm(dim=-1, keepdim=True)  # equal key norms: no key-norm term
    sums = spectra.score_sums_of_squares(torch.randn(6, 4, generator=g), unit_keys)
    assert float(sums["key_norm"]) == pytest.approx(0.0, abs=1e-12)
    assert float(sums["distance"]) == pytest.approx(float(sums["total"]))


def test_key_effect_gram_equals_the_explicit_design():
    pos = 5
    rows = []
    for i in range(pos):
        for j in range(i + 1):
            row = np.zeros(pos)
            row[j] += 1
            row[: i + 1] -= 1 / (i + 1)
            rows.append(row)
    m = np.array(rows)
    np.testing.assert_allclose(spectra.key_effect_gram(pos).numpy(), m.T @ m, atol=1e-12)


def test_measure_heads_on_a_model(model):
    tokens = torch.randint(0, 11, (5, 12), generator=torch.Generator().manual_seed(0))
    tables = spectra.measure_heads(model, tokens, n_doublings=8, eigen_sample=2, batch_size=2, progress=False)
    heads = tables["heads"]
    assert len(heads["block"]) == 3 * 2 and len(tables["diagonal"]["weight"]) == 3 * 2 * 5 * 12
    assert max(heads["row_sum_max_error"]) < 1e-5 and max(heads["above_diagonal_max"]) == 0.0
    assert max(heads["pattern_vs_scores_max_error"]) < 1e-5
    np.testing.assert_allclose(heads["share_key_effect"] + heads["share_interaction"], 1.0)
    np.testing.assert_allclose(heads["share_distance"] + heads["share_key_norm"] + heads["share_cross"], 1.0)
    trace = run(model, tokens, record=["blocks.1.attn_pattern"])
    expected = trace["blocks.1.attn_pattern"][:, 0].diagonal(dim1=-2, dim2=-1).detach()  # block 1, head 0
    d = tables["diagonal"]
    sel = (d["block"] == 1) & (d["head"] == 0)
    np.testing.assert_allclose(d["weight"][sel].reshape(5, 12), expected.numpy(), rtol=1e-6)
    assert (d["weight"][d["position"] == 0] == 1.0).all()
    head_summary = summary.summarize_heads(heads)
    top = head_summary["most_self_attention"][0]
    i = int(np.argmax(heads["diag_mean"]))
    assert (top["block"], top["head"]) == (int(heads["block"][i]), int(heads["head"][i]))
    assert json.dumps(head_summary)  # JSON-clean (no infinities)


# --- trajectories and lenses ---------------------------------------------------------------------


def test_windows_are_spread_evenly():
    ids = np.arange(100)
    w = trajectories.evenly_spaced_windows(ids, 3, 10)
    np.testing.assert_array_equal(w[:, 0], [0, 45, 90])
    assert w.dtype == np.int64 and (np.diff(w, axis=1) == 1).all()
    with pytest.raises(ValueError, match="cannot hold one window"):
        trajectories.evenly_spaced_windows(ids, 1, 101)


def test_logit_lens_at_the_last_depth_is_the_model(model):
    tokens = torch.randint(0, 11, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        resid = trajectories.depth_residuals(model, tokens)
        assert resid.shape == (4, 2, 12, 16)
        lens = trajectories.logit_lens(model, resid)
        logits, _ = model(tokens)
    torch.testing.assert_close(lens[-1], logits)
    assert not torch.allclose(lens[0], logits, atol=1e-3)  # earlier depths differ
    targets = torch.randint(0, 11, (2, 12), generator=torch.Generator().manual_seed(2))
    stats = trajectories.lens_statistics(lens, lens[-1], targets)
    assert float(stats["kl"][-1].abs().max()) < 1e-12 and float(stats["kl"][:-1].min()) >= -1e-12
    probs = measures.softmax(logits)
    torch.testing.assert_close(stats["prob"][-1], probs.gather(-1, targets[..., None])[..., 0])
    torch.testing.assert_close(stats["rank"][-1], measures.descending_ranks(logits, base=1, ties="shared", index=targets))
    torch.testing.assert_close(stats["entropy"][-1], measures.entropy(probs))


def test_next_token_cosine_and_rank():
    table = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    resid = torch.tensor([[2.0, 0.1], [0.0, 3.0], [1.0, 1.0]])
    cos, rank = trajectories.next_token_cosines(resid, table, torch.tensor([0, 2, 1]))
    torch.testing.assert_close(cos, torch.tensor([2 / math.sqrt(4.01), 0.0, math.sqrt(0.5)], dtype=torch.float64))
    assert rank.tolist() == [1, 2, 1]  # row 1: (0,3) is closest to token 1, then tokens 0 and 2 tie at 0


def test_tuned_lens_at_identity_equals_the_logit_lens(model):
    tokens = torch.randint(0, 11, (3, 12), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        resid = trajectories.depth_residuals(model, tokens)
        plain = trajectories.logit_lens(model, resid[:-1])
        tuned = TunedLens(3, 16)(model, resid[:-1])
    torch.testing.assert_close(tuned, plain, rtol=0, atol=0)
    lens = TunedLens(3, 16)
    with torch.no_grad():
        lens.b[1] += 0.5
        moved = lens(model, resid[:-1])
    torch.testing.assert_close(moved[0], plain[0], rtol=0, atol=0)
    assert not torch.allclose(moved[1], plain[1])


def test_tuned_lens_training_lowers_kl_and_round_trips(model, tmp_path):
    tokens = torch.randint(0, 11, (16, 12), generator=torch.Generator().manual_seed(4))
    resid, final = trajectories.collect_positions(model, tokens, batch_size=5)
    assert resid.shape == (4, 16 * 12, 16) and final.shape == (16 * 12, 11)
    before = [p.detach().clone() for p in model.parameters()]
    lens, history = train_tuned_lens(model, resid[:-1], final, LensTraining(steps=60, lr=1.0, batch=64),
                                     progress=False)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))  # the model stays frozen
    assert all(p.requires_grad for p in model.parameters())
    with torch.no_grad():
        plain = measures.kl_from_logits(final, trajectories.logit_lens(model, resid[:-1].unsqueeze(2))[:, :, 0])
        tuned = measures.kl_from_logits(final, lens(model, resid[:-1].unsqueeze(2))[:, :, 0])
    assert bool((tuned.mean(-1) < 0.8 * plain.mean(-1)).all()), (tuned.mean(-1), plain.mean(-1))
    assert len(history) == 60 * 3 and history[-1]["lr"] < history[0]["lr"]
    save_lens(tmp_path / "lens.safetensors", lens)
    back = load_lens(tmp_path / "lens.safetensors")
    assert torch.equal(back.A, lens.A.detach()) and torch.equal(back.b, lens.b.detach())
    write_history(tmp_path / "history.csv", history)
    assert read_history(tmp_path / "history.csv") == history
    ends = training_endpoints(history, window=10)
    assert all(last < first for first, last in zip(ends["first_steps_kl"], ends["last_steps_kl"]))


def test_a_lens_history_with_other_columns_is_refused_by_name(tmp_path):
    path = tmp_path / "history.csv"
    path.write_text("step,depth,kl\n0,0,1.5\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"history\.csv is not a tinylens tuned-lens training curve table"):
        read_history(path)


def test_measure_trajectories_columns(model):
    windows = torch.randint(0, 11, (2, 13), generator=torch.Generator().manual_seed(5))
    cols = trajectories.measure_trajectories(model, windows, TunedLens(3, 16))
    assert set(cols) == set(schemas.TRAJECTORY_SCHEMA.columns)
    assert len(cols["depth"]) == 4 * 2 * 12
    np.testing.assert_array_equal(cols["logit_rank"], cols["tuned_rank"])  # an untrained lens is the logit lens
    last = cols["depth"] == 3
    assert np.abs(cols["logit_kl"][last]).max() < 1e-12
    np.testing.assert_array_equal(cols["next_token"][cols["depth"] == 0].reshape(2, 12), windows[:, 1:].numpy())
    rows = trajectories.depth_summary(cols)
    assert [r["depth"] for r in rows] == [0, 1, 2, 3] and rows[-1]["logit_kl_mean"] == pytest.approx(0, abs=1e-12)


# --- probes --------------------------------------------------------------------------------------

PLAY = """First Citizen:
Before we proceed, hear me speak.

ROMEO:
Is the day so young? I am Romeo,
and romeo's friend.

KING RICHARD III:
Now is the winter of our discontent, said Richard the king.

ROMEO:
Ay me! sad hours seem long.
"""


def test_speeches_are_parsed_and_the_speaker_name_removed():
    found = probes.speeches(PLAY)
    assert [s for s, _ in found] == ["First Citizen", "ROMEO", "KING RICHARD III", "ROMEO"]
    assert found[1][1] == "Is the day so young? I am Romeo,\nand romeo's friend."
    assert probes.remove_name(found[1][1], "ROMEO") == "Is the day so young? I am ,\nand 's friend."
    assert probes.remove_name(found[2][1], "KING RICHARD III") == "Now is the winter of our discontent, said  the ."
    chunks = probes.passages(PLAY, ["ROMEO"], max_chars=20, min_chars=10)
    assert [c.text for c in chunks] == ["Is the day so young?", " I am ,\nand 's frien", "Ay me! sad hours see"]
    assert all(c.speaker == "ROMEO" and "romeo" not in c.text.lower() for c in chunks)
    assert probes.speaker_counts(PLAY)["ROMEO"] == 2


def test_speakers_must_appear_in_both_texts():
    train = PLAY + "\nFirst Citizen:\nAgain.\n"
    val = "ROMEO:\nHere.\n\nFirst Citizen:\nThere.\n\nKING RICHARD III:\nNo.\n"
    assert probes.choose_speakers(train, val, 2, 1) == ["First Citizen", "ROMEO"]
    with pytest.raises(ValueError, match="min_speeches"):
        probes.choose_speakers(train, val, 3, 2)


def label_features(y: np.ndarray, classes: np.ndarray, rng, noise_dims: int = 5) -> np.ndarray:
    """The label as an exact one-hot, beside dimensions of pure noise."""
    return np.hstack([(y[:, None] == classes[None, :]).astype(float), rng.normal(size=(len(y), noise_dims))])


def test_probes_read_a_label_the_features_encode():
    rng = np.random.default_rng(0)
    classes = np.array(["a", "b", "c"])
    train_y, test_y = rng.choice(classes, 300), rng.choice(classes, 200)
    scores = probes.probe_accuracies(label_features(train_y, classes, rng), train_y,
                                     label_features(test_y, classes, rng), test_y)
    assert scores["logistic"]["accuracy"] == 1.0 and scores["nearest_class_mean"]["accuracy"] == 1.0
    assert scores["logistic"]["balanced_accuracy"] == 1.0
    assert scores["chance"]["balanced_accuracy"] == pytest.approx(1 / 3)
    assert scores["chance"]["accuracy"] == pytest.approx(probes.majority_share(test_y))


def test_probes_on_shuffled_labels_stay_at_chance():
    rng = np.random.default_rng(1)
    classes = np.array(["a", "b", "c", "d"])
    train_y, test_y = rng.choice(classes, 400), rng.choice(classes, 2000)
    train_x, test_x = label_features(train_y, classes, rng), label_features(test_y, classes, rng)
    # the labels shuffled against the features on both sides: nothing left to read
    scores = probes.probe_accuracies(train_x, rng.permutation(train_y), test_x, rng.permutation(test_y))
    for name in ("logistic", "nearest_class_mean", "shuffled_labels"):
        assert abs(scores[name]["balanced_accuracy"] - 0.25) < 0.05, (name, scores[name])
    noise = probes.probe_accuracies(rng.normal(size=(400, 8)), train_y, rng.normal(size=(2000, 8)), test_y)
    assert abs(noise["shuffled_labels"]["balanced_accuracy"] - 0.25) < 0.05
    columns = probes.probe_by_depth(np.stack([train_x] * 2), train_y, np.stack([test_x] * 2), test_y, shuffles=5)
    assert set(columns) == set(schemas.PROBE_SCHEMA.columns)
    assert columns["depth"] == [0] * 4 + [1] * 4
    assert columns["classifier"][:4] == [*probes.CLASSIFIERS, "chance"]
    assert columns["accuracy"][0] == columns["accuracy"][1] == 1.0
    assert columns["balanced_accuracy_std"][0] == 0.0 and 0 < columns["balanced_accuracy_std"][2] < 0.2
    result = summary.summarize_probes(columns)
    assert result["best_logistic"]["balanced_accuracy"] == 1.0 and result["best_logistic_z_vs_shuffled"] > 5


def test_pooled_features_ignore_padding(model):
    seqs = [np.array([1, 2, 3]), np.array([4, 5, 6, 7, 8, 9]), np.array([10])]
    together = probes.pooled_features(model, seqs, batch_size=3)
    assert together.shape == (4, 3, 16)
    for i, s in enumerate(seqs):
        with torch.no_grad():
            alone = trajectories.depth_residuals(model, torch.tensor(s[None])).mean(2)[:, 0]
        np.testing.assert_allclose(together[:, i], alone.numpy(), atol=1e-5)


# --- figures: what is drawn is the data given ----------------------------------------------------


def test_diagonal_figure_has_one_box_per_head_at_the_given_weights():
    rng = np.random.default_rng(0)
    b, h, s, p = np.meshgrid(np.arange(2), np.arange(3), np.arange(4), np.arange(10), indexing="ij")
    weight = rng.uniform(size=b.shape)
    weight[p == 0] = 1.0
    cols = {"block": b.ravel(), "head": h.ravel(), "sequence": s.ravel(), "position": p.ravel(), "weight": weight.ravel()}
    (ax,) = plots.make_attention_diagonals(cols).axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1.1", "1.2", "1.3", "2.1", "2.2", "2.3"]
    means = ax.get_lines()[-1].get_ydata()  # the dots: means over positions >= 1
    np.testing.assert_allclose(means, weight[..., 1:].reshape(6, -1).mean(-1))


def test_lens_figure_draws_both_lenses_per_panel():
    rows = [{"depth": d, **{f"{lens}_{k}": v + (d if lens == "logit" else -d)
                            for lens in ("logit", "tuned") for k, v in
                            (("rank_mean", 10.0), ("prob_mean", 0.2), ("kl_mean", 1.0), ("entropy_mean", 2.0))}}
            for d in range(4)]
    fig = plots.make_lens_curves(rows, vocab_size=65)
    assert len(fig.axes) == 4
    for ax, key in zip(fig.axes, ("rank_mean", "prob_mean", "kl_mean", "entropy_mean")):
        logit, tuned = ax.get_lines()[:2]
        np.testing.assert_allclose(logit.get_ydata(), [r[f"logit_{key}"] for r in rows])
        np.testing.assert_allclose(tuned.get_ydata(), [r[f"tuned_{key}"] for r in rows])
    assert fig.axes[0].get_lines()[2].get_ydata()[0] == 33  # chance rank among 65
    assert [t.get_text() for t in fig.axes[2].get_xticklabels()] == ["emb", "1", "2", "3"]


def test_probe_figure_draws_each_classifier_and_chance():
    rng = np.random.default_rng(1)
    columns = probes.probe_by_depth(rng.normal(size=(3, 60, 4)), rng.choice(["a", "b"], 60),
                                    rng.normal(size=(3, 40, 4)), rng.choice(["a", "b"], 40), shuffles=3)
    columns = {k: np.asarray(v) for k, v in columns.items()}
    fig = plots.make_probe_accuracy(columns, n_speakers=2)
    for ax, metric in zip(fig.axes, ("accuracy", "balanced_accuracy")):
        lines = ax.get_lines()
        assert [ln.get_label() for ln in lines][-1] == "chance"
        for line, name in zip(lines, (*probes.CLASSIFIERS, "chance")):
            np.testing.assert_allclose(line.get_ydata(), columns[metric][columns["classifier"] == name])
    assert fig.axes[1].get_title() == "balanced accuracy (chance: 1/2)"


# --- the family end to end on the test preset -----------------------------------------------------


@pytest.mark.workflow
def test_attention_family_end_to_end(finished_run, test_preset):
    from tinylens.attention.schemas import PASSAGE_SCHEMA, PROBE_SCHEMA
    from tinylens.tables import read_columns
    from tinylens.weights import load_model

    n_layer, n_head = test_preset["model"]["n_layer"], test_preset["model"]["n_head"]
    settings = test_preset["attention"]
    base = finished_run / "attention/seed1337"
    metrics = json.loads((finished_run / "metrics/attention.json").read_text())
    checks = metrics["spectra"]["checks"]
    assert checks["row_sum_max_error"] < 1e-5 and checks["above_diagonal_max"] == 0.0
    # eigenvalues of nearly defective matrices are ill-conditioned (spectra.eigenvalue_diagonal_gap): the median only
    assert checks["pattern_vs_scores_max_error"] < 1e-5 and checks["eigen_gap_median"] < 1e-2
    heads = read_columns(base / "heads.parquet", schemas.HEAD_SCHEMA)
    assert len(heads["block"]) == n_layer * n_head
    assert metrics["spectra"]["most_self_attention"][0]["diag_mean"] == pytest.approx(heads["diag_mean"].max())
    assert metrics["spectra"]["least_self_attention"][0]["diag_mean"] == pytest.approx(heads["diag_mean"].min())
    absorbed = read_columns(base / "absorption.parquet", schemas.ABSORPTION_SCHEMA)
    assert sorted(set(absorbed["steps"].tolist())) == spectra.walk_steps(settings["walk_doublings"])

    per_depth = metrics["trajectories"]["per_depth"]
    assert [r["depth"] for r in per_depth] == list(range(n_layer + 1))
    assert per_depth[-1]["logit_kl_mean"] < 1e-9 and per_depth[-1]["tuned_kl_mean"] < 1e-9
    assert per_depth[0]["logit_kl_mean"] > per_depth[-2]["logit_kl_mean"]
    # trained on training text, the tuned lens is closer to the final distribution on validation text
    assert np.mean([r["tuned_kl_mean"] for r in per_depth[:-1]]) < np.mean([r["logit_kl_mean"] for r in per_depth[:-1]])
    table = read_columns(base / "trajectories.parquet", schemas.TRAJECTORY_SCHEMA)
    assert len(table["depth"]) == (n_layer + 1) * settings["sequences"] * test_preset["model"]["block_size"]

    # the last depth's probability of the next token is the model's own, recomputed here
    model = load_model(finished_run / "models/seed1337")
    val = np.load(finished_run / "data/val.npy")
    windows = trajectories.evenly_spaced_windows(val, settings["sequences"], model.config.block_size + 1)
    with torch.no_grad():
        logits, _ = model(torch.from_numpy(windows[:1, :-1]))
    probs = measures.softmax(logits[0]).numpy()[np.arange(windows.shape[1] - 1), windows[0, 1:]]
    last = (table["depth"] == n_layer) & (table["sequence"] == 0)
    np.testing.assert_allclose(table["logit_prob"][last], probs, rtol=1e-5)

    probe = read_columns(base / "probes.parquet", PROBE_SCHEMA)
    assert len(probe["depth"]) == (n_layer + 1) * 4
    shuffled = probe["classifier"] == "shuffled_labels"
    assert (probe["balanced_accuracy_std"][shuffled] > 0).all() and (probe["balanced_accuracy_std"][~shuffled] == 0).all()
    passages = read_columns(base / "passages.parquet", PASSAGE_SCHEMA)
    speakers = metrics["probes"]["speakers"]
    assert len(speakers) == settings["probe"]["speakers"]
    for speaker, text in zip(passages["speaker"], passages["text"]):
        words = {w.lower() for w in speaker.split()}
        assert not words & {w.strip(".,;:!?'").lower() for w in text.split()}, (speaker, text)
    assert metrics["probes"]["chance"]["balanced_accuracy"] == pytest.approx(1 / len(speakers))

    hull = read_columns(base / "hull.parquet", schemas.HULL_SCHEMA)
    assert len(hull["block"]) == n_layer * n_head * settings["sequences"]
    convex = metrics["convex_hull"]
    assert convex["identity_max_error"] < 1e-4  # the head's output is the attention-weighted mean of its values
    assert sum(convex["verdicts"]["shuffled"].values()) == convex["n_heads"] == n_layer * n_head
    first = (hull["block"] == 0) & (hull["head"] == 0)
    assert convex["heads"][0]["real_potential"] == pytest.approx(hull["real_potential"][first].mean(), abs=1e-6)

    import matplotlib.image as mpimg

    for name in ("attention_diagonals", "attention_absorption", "attention_hull", "lens_curves", "next_token_cosine", "probe_accuracy"):
        image = mpimg.imread(finished_run / f"figures/{name}.png")
        assert image.shape[0] > 300 and image.shape[1] > 500


def test_figures_and_summaries_read_the_tables_without_loading_torch():
    """The light jobs (summary, five figures) start in about a second, not the two torch takes."""
    import subprocess
    import sys

    code = ("import sys; import tinylens.attention.plots, tinylens.attention.schemas, tinylens.attention.summary; "
            "sys.exit('torch' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_the_final_state_against_the_next_tokens_embedding_with_its_tests():
    """Source 001's premise, for any model: a tied model's embedding row is its unembedding row; the tests are the
    cosine against 0 and the rank against chance."""
    from tinylens.attention.trajectories import alignment_summary, final_state_alignment

    torch.manual_seed(0)
    tied = Transformer(ModelConfig(vocab_size=9, block_size=8, d_model=16, n_layer=2, n_head=2, dropout=0.0,
                                   tie_embeddings=True)).eval()
    windows = torch.randint(0, 9, (6, 9), generator=torch.Generator().manual_seed(1))
    cols = final_state_alignment(tied, windows)
    assert len(cols["cos_embed"]) == 6 * 8
    np.testing.assert_array_equal(cols["cos_embed"], cols["cos_unembed"])
    with torch.no_grad():
        final = run(tied, windows[:, :-1], record=["ln_f_input"])["ln_f_input"]
    row = tied.tok_emb.weight[windows[0, 1]]
    assert cols["cos_embed"][0] == pytest.approx(float(torch.nn.functional.cosine_similarity(final[0, 0], row, 0)),
                                                abs=1e-6)
    untied = Transformer(ModelConfig(vocab_size=9, block_size=8, d_model=16, n_layer=2, n_head=2, dropout=0.0)).eval()
    cols_untied = final_state_alignment(untied, windows)
    with torch.no_grad():
        final = run(untied, windows[:, :-1], record=["ln_f_input"])["ln_f_input"]
    for table, key in ((untied.tok_emb.weight, "cos_embed"), (untied.lm_head.weight, "cos_unembed")):
        want = torch.nn.functional.cosine_similarity(final[0, 0], table[windows[0, 1]], 0)
        assert cols_untied[key][0] == pytest.approx(float(want), abs=1e-6), key
    s = alignment_summary({k: np.r_[v, v] for k, v in cols.items()}, 9)
    assert s["chance_rank"] == 5 and s["positions"] == 96
    assert s["cos_embed"]["rank"]["null"] == 5 and s["cos_embed"]["cosine"]["null"] == 0.0
    aligned = alignment_summary({"cos_embed": np.full(50, 0.5) + np.linspace(-0.1, 0.1, 50),
                                 "cos_embed_rank": np.ones(50, dtype=np.int64), "cos_unembed": np.zeros(50),
                                 "cos_unembed_rank": np.full(50, 5)}, 9)
    assert aligned["cos_embed"]["cosine"]["direction"] == "above" and aligned["cos_embed"]["rank"]["direction"] == "below"


def test_the_findings_count_blocks_from_1_and_test_the_tied_premise():
    from tinylens.attention.trajectories import alignment_summary
    from tinylens.wording import disagreements

    rng = np.random.default_rng(0)
    depth = {"tuned_kl_mean": 0.1, "logit_kl_mean": 0.2, "cos_unembed_mean": 0.44, "cos_unembed_rank_mean": 4.0,
             "cos_embed_mean": 0.006, "cos_embed_rank_mean": 35.0}
    untied = alignment_summary({"cos_embed": rng.normal(0, 0.1, 200), "cos_embed_rank": rng.integers(1, 66, 200),
                                "cos_unembed": rng.normal(0.4, 0.1, 200), "cos_unembed_rank": np.full(200, 3)}, 65)
    tied = alignment_summary({"cos_embed": rng.normal(0.4, 0.1, 200), "cos_embed_rank": np.full(200, 3),
                              "cos_unembed": rng.normal(0.4, 0.1, 200), "cos_unembed_rank": np.full(200, 3)}, 65)
    head = {"block": 2, "head": 1, "diag_mean": 0.46, "half_absorption_mean": 100.0}
    doc = {"trajectories": {"per_depth": [{**depth, "depth": d} for d in range(7)], "vocab_size": 65},
           "spectra": {"most_self_attention": [head], "absorption": {"half_absorption_median": 19.3, "slowest": head}},
           "probes": {"best_logistic": {"balanced_accuracy": 0.2}, "chance": {"balanced_accuracy": 0.17},
                      "best_logistic_z_vs_shuffled": 1.2, "best_logistic_depth": 6},
           "tied_embeddings": {"models": {
               "untied": {**untied, "training": {"seed": 1337, "steps": 2000, "val_loss": 1.811}},
               "tied": {**tied, "training": {"seed": 1337, "steps": 1000, "val_loss": 2.012}}}}}
    text = " ".join(summary.findings({"attention": doc}))
    assert "The most self-attending head is block 3, head 2" in text and "after block 5)" in text
    assert ("in the untied model (seed 1337, 2,000 training steps, validation loss 1.81) the cosine is no different "
            "from 0 (mean ") in text
    assert ("in the tied variant (seed 1337, 1,000 training steps, validation loss 2.01) the cosine is above 0 "
            "(mean 0.4") in text
    assert "the mean rank below chance (mean 3, " in text and disagreements(text) == []


@pytest.mark.workflow
def test_the_tied_variant_beside_the_untied_model(finished_run):
    alignment = json.loads((finished_run / "attention/next_token_alignment.json").read_text())
    untied, tied = (alignment["models"][k]["cos_embed"] for k in ("untied", "tied"))
    assert tied["cosine"]["mean"] > untied["cosine"]["mean"]  # a tied unembedding is the embedding
    for name, folder in (("untied", "seed1337"), ("tied", "tied")):  # each model's training, as the sentence says
        trained = json.loads((finished_run / f"models/{folder}/metrics.json").read_text())
        assert alignment["models"][name]["training"] == {k: trained[k] for k in ("seed", "steps", "val_loss")}
    metrics = json.loads((finished_run / "metrics/attention.json").read_text())
    assert metrics["tied_embeddings"]["models"]["tied"] == alignment["models"]["tied"]
