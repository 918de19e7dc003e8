"""The training-dynamics family end to end, on the outputs of the session's `test` preset run."""

import copy
import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from tinylens.config import ConfigError, train_config, validate_config
from tinylens.core.corpus import load_ids
from tinylens.dynamics.energy import interaction_energy
from tinylens.dynamics.probes import MeasureSettings, make_probes
from tinylens.dynamics.schemas import HEAD_SCORES, depth_names
from tinylens.dynamics.summary import load_curves
from tinylens.weights import load_checkpoint

from conftest import TEST_SEEDS

SEEDS = TEST_SEEDS
FIGURES = ["dynamics_energy_kl.png", "dynamics_icl_score.png", "dynamics_loss_by_position.png",
           "dynamics_head_scores.png", "dynamics_energy_depth.png"]


def test_icl_positions_and_repeats_must_fit_the_context(config, repo):
    schema = repo / "config/schema.yaml"
    bad = copy.deepcopy(config)
    bad["presets"]["test"]["dynamics"]["measure"]["icl_positions"] = [3, 32]
    with pytest.raises(ConfigError, match=r"presets\.test\.dynamics\.measure\.icl_positions.*context length \(model\.block_size = 32\)"):
        validate_config(bad, schema)
    bad = copy.deepcopy(config)
    bad["presets"]["test"]["dynamics"]["measure"]["icl_bands"] = [[2, 5], [20, 32]]
    with pytest.raises(ConfigError, match=r"presets\.test\.dynamics\.measure\.icl_bands.*context length \(model\.block_size = 32\)"):
        validate_config(bad, schema)
    bad = copy.deepcopy(config)
    bad["presets"]["small"]["dynamics"]["measure"]["repeat"]["length"] = 17
    with pytest.raises(ConfigError, match=r"presets\.small\.dynamics\.measure\.repeat.*exceed the context length \(64\)"):
        validate_config(bad, schema)


@pytest.fixture(scope="module")
def curves(finished_run):
    cfg = json.loads((finished_run / "models/seed1337/config.json").read_text())
    return {seed: load_curves(finished_run / f"dynamics/seed{seed}/checkpoints.parquet",
                              finished_run / f"dynamics/seed{seed}/heads.parquet",
                              cfg["n_layer"], cfg["n_head"], cfg["block_size"]) for seed in SEEDS}


@pytest.mark.workflow
def test_every_checkpoint_of_every_seed_is_a_row(curves, test_preset):
    for seed, c in curves.items():
        schedule = list(train_config(test_preset["train"], int(seed)).save_steps)  # 1442: one step more
        assert c.steps.tolist() == schedule, seed
        assert c.metrics["ie"].shape == (len(schedule), 8) and c.metrics["loss_by_position"].shape == (len(schedule), 32)
        assert all(c.heads[name].shape == (len(schedule), 6, 2) for name in HEAD_SCORES)
        assert np.all(np.isfinite(c.metrics["kl_model_unigram"])) and np.all(c.metrics["kl_unigram_model"] >= 0)
        assert np.all((1 - 1e-9 <= c.metrics["ie"]) & (c.metrics["ie"] <= np.e + 1e-9))
        assert np.all((c.heads["copying_eigen"] >= -1 - 1e-9) & (c.heads["copying_eigen"] <= 1 + 1e-9))
        # training works: the last checkpoint predicts far better than the initialisation
        assert c.metrics["val_loss"][-1] < c.metrics["val_loss"][0] - 1.0
        assert c.metrics["unigram_direction_kl"][-1] < c.metrics["unigram_direction_kl"][0]


@pytest.mark.workflow
def test_table_values_match_a_direct_computation(curves, finished_run, test_preset):
    """The final checkpoint's validation loss and embedding-output energy, from the model's own forward."""
    dyn, model_cfg = test_preset["dynamics"]["measure"], test_preset["model"]
    probes = make_probes(load_ids(finished_run / "data/train.npy"), load_ids(finished_run / "data/val.npy"), 65,
                         model_cfg["block_size"], MeasureSettings(**dyn))
    c = curves[1337]
    for k in (0, len(c.steps) - 1):
        model = load_checkpoint(finished_run / "models/seed1337", int(c.steps[k]))
        x = torch.as_tensor(probes.val)
        with torch.no_grad():
            _, loss = model(x[:, :-1], x[:, 1:])
            embedded = model.embed(x[: dyn["energy_windows"], :-1])
        assert c.metrics["val_loss"][k] == pytest.approx(float(loss), abs=1e-5)
        depth = depth_names(6).index("embed")
        assert c.metrics["ie"][k, depth] == pytest.approx(float(interaction_energy(embedded).mean()), rel=1e-9)
        # the step through block 1, window by window: the sign test's count
        with torch.no_grad():
            after = model.blocks[0](embedded)
        rises = int((interaction_energy(after) > interaction_energy(embedded)).sum())
        assert c.metrics["ie_rises"][k, 0] == rises and c.metrics["ie_windows"][k] == dyn["energy_windows"]


@pytest.mark.workflow
def test_metrics_json_names_the_window_the_best_head_and_the_phases(finished_run, curves):
    summary = json.loads((finished_run / "metrics/dynamics.json").read_text())
    assert set(summary["seeds"]) == {str(s) for s in SEEDS}
    assert summary["source"]["olsson_2022"]["icl_score_after_phase_change_nats"] == -0.4
    for seed, s in summary["seeds"].items():
        w = s["window"]
        assert 0 < w["start"] <= w["peak"] <= w["end"] <= s["final_step"]
        best = s["best_head"]
        c = curves[int(seed)]
        final = c.heads["prefix_matching"][-1]
        assert best["prefix_matching"] == pytest.approx(final.max())
        assert final[best["block"], best["head"]] == final.max()  # blocks and heads 0-based
        assert set(s["ie_kl"]) >= {"phase_1", "phase_2", "phase_3", "ie_critical_points", "kl_critical_points",
                                   "noise", "thresholds", "at", "middle"}
        steps = s["ie_along_depth"]["steps"]
        assert [t.get("block") for t in steps] == [0, 1, 2, 3, 4, 5, None]  # through blocks 1-6, then ln_f
        assert all(t["rises"]["n"] == s["ie_along_depth"]["windows"] for t in steps)
        assert s["phase_change_detected"] == (s["induction_head_formed"] and s["icl_significant"])
        assert s["unigram_direction_first_step"] in c.steps.tolist() + [None]
    assert 0 < summary["headline"]["prefix_matching_uniform_baseline"] < 0.2


@pytest.mark.workflow
def test_dynamics_figures_are_in_the_report(finished_run, repo, test_config, tmp_path):
    import matplotlib.image as mpimg

    for name in FIGURES:
        image = mpimg.imread(finished_run / "figures" / name)
        assert image.shape[0] > 300 and image.shape[1] > 500 and image[..., :3].std() > 0.05
    report = tmp_path / "report.html"
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(repo / "Snakefile"),
                           "-d", str(finished_run.parent.parent), "--report", str(report), "--config", *test_config],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    html = report.read_text(errors="ignore")
    assert "Training dynamics" in html and all(name in html for name in FIGURES)


@pytest.mark.workflow
def test_the_circuits_over_training_figure_read_the_windows(finished_run):
    from tinylens.dynamics.summary import phase_change_windows

    windows = phase_change_windows(json.loads((finished_run / "metrics/dynamics.json").read_text()))
    log = (finished_run / "logs/plot_composition_over_training.log").read_text()
    assert f"phase-change windows (steps) from results/test/metrics/dynamics.json: {windows}" in log
