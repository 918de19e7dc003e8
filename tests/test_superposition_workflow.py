"""The superposition family end to end on the `test` preset (outputs of the session's workflow run)."""

import json
from fractions import Fraction

import numpy as np
import pytest
import torch

from tinylens.superposition.dynamics import find_jumps
from tinylens.superposition.experiments import log_grid
from tinylens.superposition.geometry import feature_dimensionality, polygon_name
from tinylens.superposition.levels import parse_fractions
from tinylens.superposition.regimes import REGIMES, classify_regime
from tinylens.superposition.schemas import TABLES
from tinylens.superposition.summary import SummarySettings, summarize_tables, summary_settings
from tinylens.tables import read_columns

pytestmark = pytest.mark.workflow

FIGURES = ["polygons", "phase_change", "loss_crossing", "dimensionality", "fraction_histogram",
           "dimensionality_training", "phase_diagram", "correlated"]


@pytest.fixture(scope="module")
def tables(finished_run):
    return {name: read_columns(finished_run / f"superposition/{name}.parquet", schema)
            for name, schema in TABLES.items()}


@pytest.fixture(scope="module")
def spec(test_preset):
    return test_preset["superposition"]


def test_every_table_has_one_row_per_model_or_feature(tables, spec):
    u, n, d, p = spec["uniform"], spec["nonuniform"], spec["dimensionality"], spec["phase_diagram"]
    models_u = len(u["sparsities"]) * u["seeds"]
    assert len(tables["uniform_models"]["seed"]) == models_u
    assert len(tables["uniform_features"]["seed"]) == models_u * u["features"]
    models_n = n["relative_density"]["count"] * (2 + n["random_seeds"])
    assert len(tables["nonuniform_models"]["seed"]) == models_n
    assert len(tables["nonuniform_features"]["seed"]) == models_n * 5
    assert len(tables["dimensionality_models"]["sparsity"]) == len(d["sparsities"])
    assert len(tables["dimensionality_features"]["feature"]) == len(d["sparsities"]) * d["features"]
    assert len(tables["dimensionality_training"]["step"]) == len(d["sparsities"]) * d["features"] * (d["snapshots"] + 1)
    cells = p["importance"]["count"] * p["density"]["count"]
    assert len(tables["phase_cells"]["density"]) == cells
    assert len(tables["phase_models"]["seed"]) == cells * p["seeds"]
    assert np.allclose(np.unique(tables["phase_cells"]["importance"]), log_grid(p["importance"]))
    c = spec["correlated"]
    assert len(tables["correlated_models"]["seed"]) == len(c["settings"]) * c["seeds"]
    n_features = sum(s["groups"] * s["size"] for s in c["settings"].values())
    assert len(tables["correlated_features"]["seed"]) == n_features * c["seeds"]


def test_correlated_pairs_are_those_of_the_stored_columns(tables, spec, config):
    """Every pair of represented features, its cosine, type and relation, recomputed from the stored columns."""
    from tinylens.superposition.correlated import pair_cosines, pair_type, relation, settings_from_config

    f, pairs = tables["correlated_features"], tables["correlated_pairs"]
    threshold = config["superposition"]["represented_norm"]
    expected = []
    for s in settings_from_config(spec["correlated"]["settings"]):
        for seed in range(spec["correlated"]["seeds"]):
            sel = (np.asarray(f["setting"], dtype=object) == s.name) & (f["seed"] == seed)
            w = f["w"][sel][np.argsort(f["feature"][sel])].T  # [2 features]
            cos = pair_cosines(w)
            rep = np.flatnonzero(np.linalg.norm(w, axis=0) > threshold)
            expected += [(s.name, seed, i, j, pair_type(s, i, j), str(relation(cos[i, j])))
                         for a, i in enumerate(rep) for j in rep[a + 1:]]
    assert expected == list(zip(pairs["setting"], pairs["seed"], pairs["i"], pairs["j"], pairs["pair_type"],
                                pairs["relation"]))


def test_stored_geometry_is_what_the_stored_weights_give(tables, spec, config):
    """D_i and the polygon of each model, recomputed from its stored columns of W."""
    f = tables["uniform_features"]
    n = spec["uniform"]["features"]
    W = torch.tensor(f["w"].reshape(-1, n, 2)).transpose(1, 2)  # [models 2 features]
    assert np.allclose(feature_dimensionality(W).numpy().reshape(-1), f["dimensionality"], atol=1e-5)
    names = [polygon_name(w, config["superposition"]["represented_norm"])[0] for w in W.numpy()]
    assert names == list(tables["uniform_models"]["polygon"])
    pm = tables["phase_models"]
    regimes = classify_regime(torch.tensor(np.stack([pm["w0"], pm["w1"]], -1))[:, None, :])
    assert [REGIMES[c] for c in regimes] == list(pm["regime"])


def test_jumps_are_those_of_the_stored_trajectories(tables, spec, config):
    defs = config["superposition"]
    fractions = parse_fractions(defs["fractions"])
    levels = sorted({*fractions, Fraction(0)}, reverse=True)
    tr, jumps = tables["dimensionality_training"], tables["dimensionality_jumps"]
    for s in spec["dimensionality"]["sparsities"]:
        sel = np.isclose(tr["sparsity"], s)
        steps = np.unique(tr["step"][sel])
        D = tr["dimensionality"][sel].reshape(len(steps), -1)
        j = defs["jumps"]
        again = find_jumps(steps, D, levels, j["tolerance"], j["min_dwell"], j["smooth"], j["max_transition"],
                           margin=j["margin"], keep_small=True)
        stored = np.isclose(jumps["sparsity"], s)
        assert [(j.feature, j.step, str(j.from_fraction), str(j.to_fraction), j.exceeds_noise) for j in again] == list(
            zip(jumps["feature"][stored], jumps["step"][stored], jumps["from_fraction"][stored],
                jumps["to_fraction"][stored], jumps["exceeds_noise"][stored]))
    assert np.array_equal(jumps["exceeds_noise"], jumps["size_over_noise"] >= config["superposition"]["jumps"]["margin"])
    assert all(a != b for a, b in zip(jumps["from_fraction"], jumps["to_fraction"]))
    assert np.all((jumps["left_step"] < jumps["step"]) & (jumps["step"] <= jumps["arrive_step"]))


def test_metrics_are_the_summary_of_the_tables(finished_run, tables, spec, config):
    metrics = json.loads((finished_run / "metrics/superposition.json").read_text())
    again = summarize_tables(tables, SummarySettings(**summary_settings(spec, config["superposition"])))
    assert metrics["preset"] == "test"
    assert json.loads(json.dumps(again)) == {k: v for k, v in metrics.items() if k != "preset"}
    assert set(metrics) >= {"headline", "uniform", "phase_change", "dimensionality", "phase_diagram", "correlated"}
    assert all("source" in metrics[k] for k in ("uniform", "phase_change", "dimensionality", "phase_diagram"))
    assert 0 <= metrics["headline"]["phase_agreement_best_seed"] <= 1


def test_every_figure_is_a_real_image(finished_run):
    import matplotlib.image as mpimg

    for name in FIGURES:
        image = mpimg.imread(finished_run / f"figures/superposition_{name}.png")
        assert image.shape[0] > 300 and image.shape[1] > 500, name
        assert image[..., :3].std() > 0.05, name  # not a blank canvas
