"""`tinylens explain`: any prompt from a finished run, the same numbers as the case studies (tinylens.explain)."""

import json
import subprocess
import sys

import numpy as np
import pytest

from tinylens.explain import PromptError, explain, fit_prompt, output_name

VOCAB = list("\n !abcdefghijklmnopqrstuvwxyzABC")


def test_a_prompt_of_the_run_length_is_kept_a_longer_text_cut_to_its_last_characters():
    assert fit_prompt("And only l", 10, VOCAB + list("AOy")) == ("And only l", None)
    prompt, note = fit_prompt("abc def ghij", 10, VOCAB)
    assert prompt == "c def ghij"
    assert "12 characters" in note and "last 10" in note and "'c def ghij'" in note


def test_a_short_prompt_or_a_character_outside_the_vocabulary_is_an_error_naming_it():
    with pytest.raises(PromptError, match=r"'abc' has 3 characters; this run's prompts have exactly 10"):
        fit_prompt("abc", 10, VOCAB)
    with pytest.raises(PromptError, match=r"outside the corpus' vocabulary: '#', '\$' \(position\(s\) \[1, 3\]\)"):
        fit_prompt("a#b$cdefgh", 10, VOCAB)
    # the cut comes first: a bad character before the last 10 does not matter
    assert fit_prompt("#abcdefghij", 10, VOCAB)[0] == "abcdefghij"


def test_output_names_are_safe_and_distinct():
    assert output_name("And only l").startswith("And_only_l-")
    assert output_name("a/b c") != output_name("a_b c")
    assert "/" not in output_name("../../x\n")


@pytest.fixture(scope="module")
def case_studies(finished_run):
    return json.loads((finished_run / "case_studies/summary.json").read_text())


def test_the_configured_prompts_give_exactly_the_case_study_outputs(finished_run, config, case_studies):
    workdir = finished_run.parents[1]
    assert [c["prompt"] for c in case_studies["case_studies"]] == config["case_study_prompts"]
    for case in case_studies["case_studies"]:
        e = explain(case["prompt"], preset="test", workdir=workdir, progress=False)
        assert e["case_study"] == case
        assert e["vocab"] == case_studies["vocab"]
        # per block: the block-alone approximation counts the block's strings above its tuned threshold
        assert [b["matches"] for b in e["blocks"]] == case["tuned"]["matches"]
        assert e["combined"]["hellinger"] == case["tuned"]["hellinger"]
        q = np.asarray(case["model"])
        top = [e["vocab"].index(t) for t, _ in e["model"]]
        assert top == list(np.argsort(-q, kind="stable")[: len(top)])


def test_the_command_prints_writes_and_exits_2_on_a_bad_prompt(finished_run, tmp_path):
    workdir = finished_run.parents[1]
    cmd = [sys.executable, "-m", "tinylens", "explain", "--preset", "test", "--workdir", str(workdir)]
    ok = subprocess.run([*cmd, "--out", str(tmp_path), "ROMEO:\nAnd only l"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert "explaining its last 10: 'And only l'" in ok.stdout
    assert "block 6: threshold" in ok.stdout and "reading the run's dumps" in ok.stderr
    written = json.loads(next(tmp_path.glob("*.json")).read_text())
    assert written["prompt"] == "And only l" and len(written["blocks"]) == 6
    assert next(tmp_path.glob("*.png")).stat().st_size > 0
    for bad, message in (("And only", "has 8 characters"), ("And only \t", "'\\t'")):
        proc = subprocess.run([*cmd, bad], capture_output=True, text=True)
        assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
    missing = subprocess.run([*cmd[:4], "--preset", "nope", "--workdir", str(workdir), "And only l"],
                             capture_output=True, text=True)
    assert missing.returncode == 1 and "no finished 'nope' run" in missing.stderr


def test_a_bad_prompt_is_reported_before_torch_is_imported(finished_run):
    """The checks need only the run's tokenizer: the error comes at once, not after torch's import."""
    code = ("import sys; from tinylens.cli import main; "
            f"code = main(['explain', '--preset', 'test', '--workdir', {str(finished_run.parents[1])!r}, 'And only']); "
            "print(code, 'torch' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.stdout.split() == ["2", "False"], proc.stdout + proc.stderr


def test_the_explanation_figure_draws_the_model_and_the_approximation():
    from tinylens.core.plots import make_explanation

    vocab = ["a", "b", "c"]
    case = {"model": [0.7, 0.2, 0.1], "tuned": {"distribution": [0.5, 0.1, 0.4], "hellinger": 0.123}}
    blocks = [{"block": 0, "threshold": 0.9, "matches": 3, "examples": ["xa", "ya"], "alone": {"hellinger": 0.2}}]
    fig = make_explanation({"prompt": "ab", "vocab": vocab, "case_study": case, "blocks": blocks, "note": None})
    bars = fig.axes[0]
    heights = [p.get_height() for p in bars.patches]
    assert heights == [0.7, 0.1, 0.2, 0.5, 0.4, 0.1]  # model, then approximation, tokens by model + approximation
    assert "Hellinger 0.123" in bars.get_title()
    assert "0.200" in fig.axes[1].texts[0].get_text()
