import numpy as np
import pytest

from tinylens.core.search import CountsCSR, search_block, threshold_edges
from tinylens.core.verification import sample_prompt_ids, verify_search

EDGES = threshold_edges(0.70, 0.01, 30)


def test_sample_prompt_ids_is_seeded_random_and_draws_ids_not_rows():
    ids = np.arange(1000, 1100)
    a = sample_prompt_ids(ids, 10, seed=0, salt="corpus")
    assert len(set(a)) == 10 and set(a) <= set(ids.tolist()) and list(a) == sorted(a)
    assert np.array_equal(a, sample_prompt_ids(ids, 10, seed=0, salt="corpus"))
    assert not np.array_equal(a, sample_prompt_ids(ids, 10, seed=0, salt="heldout"))
    assert not np.array_equal(a, sample_prompt_ids(ids, 10, seed=1, salt="corpus"))
    assert not np.array_equal(a, np.arange(1000, 1010))  # not the first ids
    assert sorted(sample_prompt_ids(ids, 500, seed=0)) == ids.tolist()
    with pytest.raises(ValueError, match="at least one"):
        sample_prompt_ids(ids, 0, seed=0)


@pytest.fixture
def searched():
    """Prompts with ids out of row order, and a correct search summary in another (id) order."""
    rng = np.random.default_rng(0)
    strings = rng.normal(size=(300, 8)).astype(np.float32)
    prompts = np.concatenate([strings[:10] + 0.3 * rng.normal(size=(10, 8)), rng.normal(size=(10, 8))])
    prompts = prompts.astype(np.float32)
    counts = rng.integers(0, 3, (300, 5)).astype(np.uint32)
    prompt_ids = rng.permutation(np.arange(100, 120))  # the prompt table: row r has id prompt_ids[r]
    blocks = [prompts, prompts[:, ::-1].copy()]
    results = [search_block(b, strings if k == 0 else strings[:, ::-1].copy(), CountsCSR.from_dense(counts), EDGES)
               for k, b in enumerate(blocks)]
    matches = np.stack([r[0] for r in results], axis=1)
    summed = np.stack([r[1] for r in results], axis=1)
    order = np.argsort(prompt_ids)  # the summary is sorted by id, as load_summary returns it
    string_blocks = [strings, strings[:, ::-1].copy()]
    return dict(summary_ids=prompt_ids[order], matches=matches[order], counts=summed[order], prompt_ids=prompt_ids,
                prompt_block=lambda b: blocks[b], string_block=lambda b: string_blocks[b], string_counts=counts)


def run(searched, sample):
    s = searched
    return verify_search(sample, s["summary_ids"], s["matches"], s["counts"], s["prompt_ids"], s["prompt_block"],
                         s["string_block"], s["string_counts"], EDGES)


def test_a_correct_search_is_equal(searched):
    sample = sample_prompt_ids(searched["prompt_ids"], 8, seed=3)
    report = run(searched, sample)
    assert report["equal"] and report["mismatched_prompt_ids"] == {}
    assert report["prompts_checked"] == 8 and report["checked_ids"] == sample.tolist()
    assert report["blocks"] == 2 and report["strings"] == 300 and report["prompts"] == 20


def test_a_wrong_cell_is_found_and_named_by_prompt_id(searched):
    sample = np.sort(searched["prompt_ids"])  # every prompt
    bad_id = int(searched["summary_ids"][4])
    searched["counts"][4, 1, 29, 0] += 1  # one count, block 1, the last bin
    report = run(searched, sample)
    assert not report["equal"] and report["mismatched_prompt_ids"] == {"1": [bad_id]}


def test_rows_are_not_taken_for_ids(searched):
    """A summary whose rows are in the prompt table's order (not sorted by id) but labelled sorted."""
    s = searched
    rows = np.argsort(np.argsort(s["prompt_ids"]))  # undo the id sort: back to table order
    s["matches"], s["counts"] = s["matches"][rows], s["counts"][rows]
    report = run(s, np.sort(s["prompt_ids"]))
    assert not report["equal"]


def test_a_sampled_id_missing_from_the_summary_is_an_error(searched):
    s = searched
    s["summary_ids"] = s["summary_ids"].copy()
    s["summary_ids"][0] = 999
    with pytest.raises(ValueError, match=r"prompt ids \[100\] are not in the search summary"):
        run(s, np.array([100, 101]))
