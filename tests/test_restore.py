"""The restore and publish commands' checks that need no DVC repository: they fail closed."""

import pytest

from tinylens.restore import RestoreError, check_config, check_lock, parse_summary, pending_jobs

HEADER = "output_file\tdate\trule\tlog-file(s)\tstatus\tplan"
SUMMARY = "\n".join([
    "Building DAG of jobs...",  # Snakemake's chatter around the table is ignored
    HEADER,
    "results/t/data/corpus.txt\tMon Nov 23 10:00:00 2026\tdownload_corpus\t-\tok\tno update",
    "results/t/search/corpus/shard_1-of-2.parquet\t-\tsearch_shard\t-\tmissing\tupdate pending",
    "results/t/approx/corpus/tuned.json\tMon Nov 23 10:00:00 2026\ttune_approximation\t-\tupdated input files"
    "\tupdate pending",
    "",
])


def test_summary_rows_are_read_with_status_and_plan():
    rows = parse_summary(SUMMARY)
    assert [(r.rule, r.status, r.pending) for r in rows] == [
        ("download_corpus", "ok", False), ("search_shard", "missing", True),
        ("tune_approximation", "updated input files", True)]
    assert rows[1].path == "results/t/search/corpus/shard_1-of-2.parquet"
    assert pending_jobs(rows) == {"search_shard": 1, "tune_approximation": 1}


@pytest.mark.parametrize("text", [
    "Job stats:\njob    count\ntrain_model    4\n",  # the human-readable plan: not understood
    "",
    HEADER.replace("plan", "todo") + "\nx\t-\tr\t-\tok\tno update\n",
    HEADER + "\nx\t-\tr\t-\tok\n",  # a short row
    HEADER + "\nx\t-\tr\t-\tok\tmaybe\n",  # an unknown plan
])
def test_an_unreadable_plan_is_an_error_not_nothing_to_do(text):
    with pytest.raises(RestoreError, match="could not read Snakemake's plan"):
        parse_summary(text)


def test_only_config_keys_that_cannot_change_results_are_passed_on():
    assert check_config(["corpus_url=/data/input.txt"]) == ["corpus_url=/data/input.txt"]
    with pytest.raises(RestoreError, match=r"--config seeds=\{original: 1\} preset=paper: only corpus_url may be set"):
        check_config(["seeds={original: 1}", "corpus_url=/x", "preset=paper"])
    with pytest.raises(RestoreError, match="only corpus_url"):
        check_config(["corpus_url"])  # not KEY=VALUE


def test_no_dvc_lock_says_what_to_do(tmp_path):
    with pytest.raises(RestoreError) as err:
        check_lock("small", tmp_path)
    message = str(err.value)
    assert message.startswith("this checkout has no dvc.lock: no artifacts of preset 'small' were published")
    assert "tinylens-publish --preset small" in message and "snakemake --cores all --config preset=small" in message
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\nstages:\n  workflow@test:\n    cmd: x\n")
    check_lock("test", tmp_path)
    with pytest.raises(RestoreError, match="this checkout's dvc.lock has no entry for workflow@small: no artifacts"):
        check_lock("small", tmp_path)
