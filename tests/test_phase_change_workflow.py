"""The phase-change family end to end (method.md §8b), on the outputs of the session's `test` preset run."""

import json

import numpy as np
import pytest

from tinylens.phase_change.detect import DetectSettings, uniform_prefix_matching
from tinylens.phase_change.run import checkpoint_steps
from tinylens.phase_change.schemas import COMPOSITION_SCHEMA, HEADS_SCHEMA, TESTS, curves_schema, run_settings
from tinylens.phase_change.summary import VerdictSettings, load_run, seed_evidence, seed_verdict
from tinylens.tables import read_columns


@pytest.fixture(scope="module")
def phase(test_preset):
    return test_preset["phase_change"]


@pytest.fixture(scope="module")
def summary(finished_run):
    return json.loads((finished_run / "metrics/phase_change.json").read_text())


def test_every_seed_and_checkpoint_is_a_row(finished_run, phase):
    """Per run: one curves row per seed and checkpoint, one heads row per seed, checkpoint, head and probe
    period, one composition row per seed, checkpoint and (layer 0, layer 1) pair; the ablation only at the
    last checkpoint."""
    for name, run in phase["runs"].items():
        s = run_settings(phase["base"], run)
        steps = checkpoint_steps(s["first"], s["ratio"], s["steps"])
        seeds, periods = s["seeds"], phase["probes"]["probe_periods"]
        curves = read_columns(finished_run / f"phase_change/{name}/curves.parquet", curves_schema(s["context"]))
        heads = read_columns(finished_run / f"phase_change/{name}/heads.parquet", HEADS_SCHEMA)
        pairs = read_columns(finished_run / f"phase_change/{name}/composition.parquet", COMPOSITION_SCHEMA)
        assert sorted(zip(curves["seed"].tolist(), curves["step"].tolist())) == [(a, b) for a in seeds for b in steps]
        assert len(heads["step"]) == len(seeds) * len(steps) * s["n_layer"] * s["n_head"] * len(periods)
        assert len(pairs["step"]) == len(seeds) * len(steps) * (s["n_head"] ** 2 if s["n_layer"] == 2 else 0)
        last = heads["step"] == steps[-1]
        assert np.isfinite(heads["ablation_raise"][last]).all() and np.isnan(heads["ablation_raise"][~last]).all()


def test_the_summary_reads_the_tables_it_was_given(finished_run, phase, summary):
    """Each seed's best head's final per-period scores are the heads table's, the uniform head's are exact, and
    re-deciding a seed from the tables gives its entry's verdict."""
    ds, vs = DetectSettings(**phase["detect"]), VerdictSettings(**phase["verdict"])
    for name, run in phase["runs"].items():
        s = run_settings(phase["base"], run)
        tables = load_run(*(finished_run / f"phase_change/{name}/{t}.parquet" for t in ("curves", "heads", "composition")),
                          s["context"])
        heads = tables[1]
        for seed, entry in summary["runs"][name]["seeds"].items():
            b = entry["best_head"]
            for p in b["probe_periods"]:
                rows = ((heads["seed"] == int(seed)) & (heads["step"] == heads["step"].max()) & (heads["layer"] == b["layer"])
                        & (heads["head"] == b["head"]) & (heads["period"] == p))
                assert b["final_prefix_matching"][str(p)] == pytest.approx(float(heads["prefix_matching"][rows][0]))
                assert b["uniform_prefix_matching"][str(p)] == pytest.approx(uniform_prefix_matching(s["context"], p))
            again = seed_verdict(seed_evidence(s, *tables, int(seed)), ds, vs.rule, full=False)
            assert again["phase_change_detected"] == entry["phase_change_detected"]
            assert set(entry["tests"]) == set(TESTS)
            assert [t for t, v in entry["tests"].items() if v["in_rule"]] == [t for t in TESTS if t in vs.rule]


def test_the_sensitivity_table_holds_the_configured_verdict(phase, summary):
    grid = summary["sensitivity"]
    sens = phase["verdict"]["sensitivity"]
    assert [(r["min_rise"], r["z"]) for r in grid] == [(m, z) for m in sens["min_rise"] for z in sens["z"]]
    here = next(r for r in grid if r["min_rise"] == phase["detect"]["min_rise"] and r["z"] == phase["detect"]["z"])
    assert here["detected_seeds"] == {n: r["detected_seeds"] for n, r in summary["runs"].items()}


def test_the_rule_report_lists_where_each_test_fails(phase, summary):
    report = summary["verdict_rule"]
    assert report["rule"] == phase["verdict"]["rule"]
    for test, where in report["fails_in_controls"].items():
        for label in where:
            name, seed = label.split("/")
            assert name != phase["reference"] and not summary["runs"][name]["seeds"][seed]["tests"][test]["pass"]
    assert report["rule_tests_never_failing"] == [t for t in report["rule"] if not report["fails_in_controls"][t]]
