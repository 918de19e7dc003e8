"""The controls of the core claim (method.md §6b) end to end, on the outputs of the shared `test`-preset run."""

import json

import numpy as np
import pytest

from tinylens.core.approx import split_masks
from tinylens.core.controls import TABLES, evaluation_prompts, read_controls
from tinylens.core.search import load_summary
from tinylens.core.strings import load_prompts
from tinylens.measures import paired_difference

from conftest import TEST_SEEDS

pytestmark = pytest.mark.workflow


@pytest.fixture(scope="module")
def controls(finished_run):
    return json.loads((finished_run / "metrics/controls.json").read_text())


def test_the_null_is_summed_for_the_same_matches_with_the_counts_permuted(finished_run):
    """The null's shards hold the real search's matches and, per prompt, block and bin, as many counts (a
    permutation moves counts between strings, not in or out of the searched set at the lowest edge's total)."""
    config = json.loads((finished_run / f"models/seed{TEST_SEEDS[0]}/config.json").read_text())
    n_layer, vocab = config["n_layer"], config["vocab_size"]
    for mode in ("corpus", "heldout", "paper"):
        real = sorted((finished_run / f"search/{mode}").glob("shard_*.parquet"))
        null = sorted((finished_run / f"search/{mode}/null").glob("shard_*.parquet"))
        assert len(real) == len(null) >= 1
        ids, m_real, c_real = load_summary(real, n_layer, 30, vocab)
        null_ids, m_null, c_null = load_summary(null, n_layer, 30, vocab)
        np.testing.assert_array_equal(ids, null_ids)
        np.testing.assert_array_equal(m_real, m_null)
        assert not np.array_equal(c_real, c_null)


def test_every_source_is_paired_with_its_reference_on_the_evaluation_prompts(finished_run, controls):
    """The controls' tables list each mode's evaluation prompts; every paired test in the metrics is the paired
    t-test of the tables' columns; the null fails."""
    tables = read_controls({name: finished_run / f"controls/{name}.parquet" for name in TABLES})
    n_layer = json.loads((finished_run / f"models/seed{TEST_SEEDS[0]}/config.json").read_text())["n_layer"]
    for mode in ("heldout", "paper"):
        evaluation = evaluation_prompts(finished_run / f"evaluation/{mode}/hellinger.parquet", TEST_SEEDS[1:], n_layer)
        prompts = load_prompts(finished_run / f"strings/prompts_{mode}.parquet")
        on_eval = split_masks(prompts["split"])["eval"]
        np.testing.assert_array_equal(tables[mode]["prompt_id"], np.asarray(prompts["prompt_id"])[on_eval])
        np.testing.assert_array_equal(evaluation["prompt_id"], tables[mode]["prompt_id"])
        sources = controls["modes"][mode]["sources"]
        assert controls["modes"][mode]["n"] == int(on_eval.sum())
        full = evaluation["hellinger_approx"]
        assert paired_difference(tables[mode]["hellinger_suffix"], full) == sources["suffix"]["versus_ffwd_out"]
        assert paired_difference(tables[mode]["hellinger_sa_out"], tables[mode]["hellinger_ffwd_out"]) == \
            sources["sa_out"]["versus_ffwd_out"]
        assert sources["null"]["verdict"] == "ffwd_out better" and sources["null"]["mean"] > 0.3
        assert len(controls["modes"][mode]["tuned"]["ffwd_and_sa_out"]["thresholds"]) == 12
        blocks = controls["modes"][mode]["blocks"]
        assert len(blocks) == n_layer and sum(b["effective_share"] for b in blocks) == pytest.approx(1.0, abs=1e-5)
    assert (finished_run / "figures/controls.png").stat().st_size > 10_000
