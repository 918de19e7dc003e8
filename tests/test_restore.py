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
    assert "tinylens publish --preset small" in message and "snakemake --cores all --config preset=small" in message
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\nstages:\n  workflow@test:\n    cmd: x\n")
    check_lock("test", tmp_path)
    with pytest.raises(RestoreError, match="this checkout's dvc.lock has no entry for workflow@small: no artifacts"):
        check_lock("small", tmp_path)


# --- restore() and publish() end to end, with DVC, Snakemake and git replaced by canned answers ---

OK_ROW = "results/t/search/corpus/shard_1-of-2.parquet\tMon Nov 23 10:00:00 2026\tsearch_shard\t-\tok\tno update"
MISSING_ROW = "results/t/search/heldout/shard_2-of-2.parquet\t-\tsearch_shard\t-\tmissing\tupdate pending"
PENDING_ROW = "results/t/approx/corpus/tuned.json\tMon Nov 23 10:00:00 2026\ttune_approximation\t-\tok\tupdate pending"


class Tools:
    """Stands in for `dvc`, `snakemake` and `git`: answers from ``answers`` (first match of a word in the
    command), records every command run."""

    def __init__(self, **answers):
        self.answers = {"status": (0, "{}"), "--summary": [(0, f"{HEADER}\n{OK_ROW}\n")], "--touch": (0, ""),
                        "commit": (0, ""), "push": (0, ""), "add": (0, ""), "diff": (1, ""), **answers}
        self.ran = []

    def __call__(self, cmd, cwd):
        import subprocess

        self.ran.append(list(cmd))
        for word, answer in self.answers.items():
            if word in cmd:
                if isinstance(answer, list):  # successive answers, the last one repeated
                    answer = answer.pop(0) if len(answer) > 1 else answer[0]
                return subprocess.CompletedProcess(cmd, answer[0], answer[1], "")
        raise AssertionError(f"unexpected command {cmd}")

    def ran_word(self, word):
        return [c for c in self.ran if word in c]


@pytest.fixture
def checkout(tmp_path):
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\nstages:\n  workflow@test:\n    cmd: x\n")
    return tmp_path


def restore_with(monkeypatch, checkout, tools):
    import tinylens.restore as module

    monkeypatch.setattr(module, "_run", tools)
    return module.restore("test", checkout)


def test_a_complete_clean_set_is_touched_and_then_plans_nothing(monkeypatch, checkout):
    tools = Tools()
    after = restore_with(monkeypatch, checkout, tools)
    assert [r.status for r in after] == ["ok"] and len(tools.ran_word("--touch")) == 1
    assert len(tools.ran_word("--summary")) == 2  # before (completeness) and after (nothing pending)


def test_artifacts_dvc_does_not_match_are_refused_before_snakemake_runs(monkeypatch, checkout):
    tools = Tools(status=(0, '{"workflow@test": [{"changed deps": {"src/tinylens": "modified"}}]}'))
    with pytest.raises(RestoreError, match=r"not those dvc.lock records.*\n  workflow@test: changed deps src/tinylens "
                                           r"modified"):
        restore_with(monkeypatch, checkout, tools)
    assert not tools.ran_word("--summary") and not tools.ran_word("--touch")


def test_an_incomplete_set_is_refused_before_anything_is_touched(monkeypatch, checkout):
    tools = Tools(**{"--summary": [(0, f"{HEADER}\n{OK_ROW}\n{MISSING_ROW}\n")]})
    with pytest.raises(RestoreError, match=r"records an incomplete set .*\n  results/t/search/heldout/shard_2-of-2\.parquet "
                                           r"\(search_shard: missing\)"):
        restore_with(monkeypatch, checkout, tools)
    assert not tools.ran_word("--touch")


@pytest.mark.parametrize("plan", ["Job stats:\njob    count\ntrain_model    4\n", ""])
def test_a_plan_the_restore_cannot_read_stops_it_before_anything_is_touched(monkeypatch, checkout, plan):
    tools = Tools(**{"--summary": [(0, plan)]})
    with pytest.raises(RestoreError, match="could not read Snakemake's plan"):
        restore_with(monkeypatch, checkout, tools)
    assert not tools.ran_word("--touch")


def test_jobs_still_planned_after_the_touch_are_an_error(monkeypatch, checkout):
    tools = Tools(**{"--summary": [(0, f"{HEADER}\n{OK_ROW}\n"), (0, f"{HEADER}\n{OK_ROW}\n{PENDING_ROW}\n")]})
    with pytest.raises(RestoreError, match=r"still plans jobs for:\n  results/t/approx/corpus/tuned\.json"):
        restore_with(monkeypatch, checkout, tools)


@pytest.mark.parametrize("failing", ["status", "--summary", "--touch"])
def test_a_failing_tool_is_an_error_not_success(monkeypatch, checkout, failing):
    """Even where what it printed before failing reads as a clean answer."""
    normal = Tools().answers[failing]
    normal = normal[0] if isinstance(normal, list) else normal
    tools = Tools(**{failing: (1, normal[1])})
    with pytest.raises(RestoreError):
        restore_with(monkeypatch, checkout, tools)


def test_publish_refuses_an_unfinished_run_and_otherwise_commits_pushes_and_commits_dvc_lock(monkeypatch, checkout):
    import tinylens.restore as module

    for row in (MISSING_ROW, PENDING_ROW):
        tools = Tools(**{"--summary": [(0, f"{HEADER}\n{OK_ROW}\n{row}\n")]})
        monkeypatch.setattr(module, "_run", tools)
        with pytest.raises(RestoreError, match="not complete and up to date, so nothing was published"):
            module.publish("test", checkout)
        assert [c for c in tools.ran if c[0] in ("dvc", "git")] == []
    tools = Tools()
    monkeypatch.setattr(module, "_run", tools)
    assert module.publish("test", checkout) == "published preset 'test': dvc.lock committed, artifacts pushed"
    assert [c[:2] for c in tools.ran if c[0] in ("dvc", "git")] == [
        ["dvc", "commit"], ["dvc", "push"], ["git", "add"], ["git", "diff"], ["git", "commit"]]


def test_publish_commits_the_run_headline_with_dvc_lock(monkeypatch, checkout, repo):
    """The outputs dvc.yaml leaves to git (`cache: false`: the run's headline, which `dvc metrics diff`
    compares against) are added and committed with dvc.lock, and nothing else."""
    import shutil

    import tinylens.restore as module

    shutil.copy(repo / "dvc.yaml", checkout / "dvc.yaml")
    tools = Tools()
    monkeypatch.setattr(module, "_run", tools)
    module.publish("test", checkout)
    committed = ["--", "dvc.lock", "results/headline/test.json"]
    git = [c for c in tools.ran if c[:2] in (["git", "add"], ["git", "diff"], ["git", "commit"])]
    assert [c[-3:] for c in git] == [committed] * 3
