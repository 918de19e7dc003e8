"""The run's findings in words (tinylens.findings): every family's sentences from its metrics, the wording chosen
by the data, a missing file or key skipped with a note, and README.md's block rendered from the committed
snapshot."""

import importlib
import json

import pytest

from tinylens import findings
from tinylens.dynamics.summary import findings as dynamics_findings
from tinylens.families import FAMILIES
from tinylens.findings import BEGIN, END, block, render, replace_block, take_snapshot

SUPERPOSITION = {"headline": {
    "uniform_sparsest_mean_represented": 4.75, "uniform_sparsest_pentagon_share": 0.75,
    "crossing_relative_density": 0.2605, "crossing_odd_sparsity": 0.98697, "share_near_fraction": 0.76,
    "share_near_fraction_in_range": 0.98, "chance_share_in_range": 0.36, "jumps_total": 15,
    "phase_agreement_best_seed": 0.94, "phase_boundary_mean_abs_log10_ratio": 0.07}}


def test_readme_block_is_rendered_from_the_snapshot(repo):
    """No result number in README.md is typed by hand: its block is what the committed snapshot renders.
    After a change to a family's sentences: `tinylens findings render`; after a new default run:
    `tinylens findings snapshot results/small`."""
    readme = (repo / "README.md").read_text(encoding="utf-8")
    expected = replace_block(readme, block(repo))
    assert readme == expected, ("README.md's findings block differs from what docs/snapshot/ renders: run "
                                "`tinylens findings render` (never edit the block by hand)")


def test_the_snapshot_renders_every_family_it_holds(repo):
    """Every family whose metrics the snapshot holds renders its sentences (none skipped for a missing key)."""
    meta = json.loads((repo / "docs/snapshot/snapshot.json").read_text(encoding="utf-8"))
    assert {"preset", "commit", "date", "machine", "files"} <= set(meta)
    text = block(repo)
    assert "has no key" not in text and "has no findings()" not in text
    for family in FAMILIES:
        if all(path in meta["files"] for path in family.paths().values()):
            assert f"#### {family.title}\n\n*skipped" not in text, family.key


def test_every_family_module_writes_findings():
    for family in FAMILIES:
        assert callable(getattr(importlib.import_module(family.module), "findings", None)), family.module


def _write(root, path, document):
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text(json.dumps(document), encoding="utf-8")


def test_a_missing_metrics_file_skips_only_that_family_with_a_note(tmp_path):
    _write(tmp_path, "metrics/superposition.json", SUPERPOSITION)
    text = render(tmp_path)
    assert "at the sparsest setting 4.75 of 5 are represented on average, as a pentagon in 75% of the seeds" in text
    assert "cross at the odd feature's sparsity 0.987 (0.26 times the others' density)" in text
    assert "*skipped: metrics/training.json is missing (this run did not make it)*" in text
    assert "*skipped: metrics/dynamics.json is missing (this run did not make it)*" in text
    assert text.count("*skipped:") == len(FAMILIES) - 1


def test_a_missing_key_skips_the_family_naming_file_and_key(tmp_path):
    broken = {"headline": {k: v for k, v in SUPERPOSITION["headline"].items() if k != "crossing_odd_sparsity"}}
    _write(tmp_path, "metrics/superposition.json", broken)
    assert ("*skipped: metrics/superposition.json has no key crossing_odd_sparsity (metrics of another version of "
            "the code: rerun the family)*") in render(tmp_path)


def _dynamics(prefix_matching: float, formed: bool, icl: float, se: float) -> dict:
    seed = {"best_head": {"block": 3, "head": 1, "prefix_matching": prefix_matching},
            "induction_head_formed": formed, "icl_significant": icl + 2 * se < 0,
            "final": {"icl_band": icl, "icl_band_se": se}}
    return {"dynamics": {
        "settings": {"induction_threshold": 0.3},
        "headline": {"prefix_matching_uniform_baseline": 0.049, "seeds_with_phase_change": int(formed and icl + 2 * se < 0),
                     "phases_present": {"1337": [1, 2]}},
        "seeds": {"1337": seed}}}


def test_the_data_chooses_the_wording():
    none = " ".join(dynamics_findings(_dynamics(0.046, False, 0.085, 0.09)))
    assert ("No induction head forms in any of the 1 model (seed 1337): the best final prefix-matching score is "
            "0.046") in none
    assert "against a uniform head's 0.049" in none and "No phase change is detected in any model." in none
    assert "in no model two standard errors below 0" in none and "An induction head" not in none
    found = " ".join(dynamics_findings(_dynamics(0.62, True, -0.4, 0.05)))
    # blocks and heads counted from 1 for people: the metrics' block 3, head 1
    assert "An induction head forms in 1 of the 1 model (seed 1337)" in found and "block 4, head 2 of seed 1337" in found
    assert "A phase change (both together) is detected in 1 of 1 models." in found and "No " not in found
    assert "Source 000's phases" in found and "Seed 000" not in found


def test_the_comparison_sentences_say_what_the_verdicts_say():
    from tinylens.comparison import findings as comparison_findings

    rows = [{"id": "hellinger_mean", "quantity": "mean H", "paper": 0.1677, "like_for_like": 0.2376,
             "difference": 0.0699, "ci_low": 0.0595, "ci_high": 0.0803, "p_value": 1.1e-39, "verdict": "differs"},
            {"id": "n_params", "quantity": "parameters", "paper": 10788929.0, "like_for_like": 311617.0,
             "verdict": "not comparable"}]
    doc = {"counts": {"rows": 2, "consistent": 0, "differs": 1, "not comparable": 1, "no spread": 0,
                      "not computed": 0}, "level": 0.05, "rows": rows,
           "differences_from_the_paper": {"model": "a different model: n_embed 64 (the paper: 384)"}}
    text = " ".join(comparison_findings({"comparison": doc}))
    assert text.startswith("Of the 2 published numbers, 1 differ, 1 are not comparable at this preset")
    assert "The like-for-like mean Hellinger distance, 0.238, differs from the paper's 0.168" in text
    assert "Not comparable here: model: a different model: n_embed 64 (the paper: 384)." in text
    rows[0]["verdict"] = "consistent"
    assert "is no different from the paper's" in " ".join(comparison_findings({"comparison": doc}))
    # a different model: the same prompts' numbers side by side, as what they are, with no verdict
    rows[0].update(verdict="not comparable", p_value=None)
    text = " ".join(comparison_findings({"comparison": doc}))
    assert ("On the paper's own prompts with its thresholds and weights, this run's model is approximated to a mean "
            "Hellinger distance of 0.238, the paper's model to 0.168: two different models on the same prompts, so no "
            "verdict on the paper's number.") in text and "p = " not in text


def test_snapshot_copies_a_run_with_its_provenance_and_renders_the_block(tmp_path):
    repo, run = tmp_path / "repo", tmp_path / "results/small"
    repo.mkdir()
    (repo / "README.md").write_text(f"# x\n\n{BEGIN}\nstale text 0.123\n{END}\n\nmore\n", encoding="utf-8")
    _write(run, "metrics/superposition.json", SUPERPOSITION)
    copied = take_snapshot(run, repo)
    assert copied == ["metrics/superposition.json"]
    meta = json.loads((repo / "docs/snapshot/snapshot.json").read_text(encoding="utf-8"))
    assert meta["preset"] == "small" and meta["files"] == copied and "CPUs" in meta["machine"]
    readme = (repo / "README.md").read_text(encoding="utf-8")
    assert "stale text" not in readme and readme.startswith("# x\n\n" + BEGIN) and readme.endswith(END + "\n\nmore\n")
    assert "From the `small` run of commit" in readme and "as a pentagon in 75% of the seeds" in readme
    with pytest.raises(FileNotFoundError, match="results/<preset>"):
        take_snapshot(tmp_path / "nothing", repo)
    (repo / "README.md").write_text("# no block\n", encoding="utf-8")
    with pytest.raises(ValueError, match="has no generated block"):
        findings.render_readme(repo)


def test_a_snapshot_of_a_clean_checkout_is_not_called_dirty(tmp_path):
    """The snapshot rewrites tracked files (docs/snapshot/, README.md): the checkout's state is read before."""
    import subprocess

    repo, run = tmp_path / "repo", tmp_path / "results/small"
    repo.mkdir()
    (repo / "README.md").write_text(f"# x\n\n{BEGIN}\n{END}\n", encoding="utf-8")
    _write(run, "metrics/superposition.json", SUPERPOSITION)
    take_snapshot(run, repo)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "snapshot"], check=True)
    SUPERPOSITION_CHANGED = json.loads(json.dumps(SUPERPOSITION))
    SUPERPOSITION_CHANGED["headline"]["crossing_odd_sparsity"] = 0.5  # another run: the snapshot's files change
    _write(run, "metrics/superposition.json", SUPERPOSITION_CHANGED)
    take_snapshot(run, repo)
    meta = json.loads((repo / "docs/snapshot/snapshot.json").read_text(encoding="utf-8"))
    assert meta["dirty"] is False and len(meta["commit"]) == 40


def test_superposition_findings_state_the_jump_rule_and_the_correlated_claims(tmp_path):
    doc = json.loads(json.dumps(SUPERPOSITION))
    doc["headline"].update(jumps_total=4, moves_within_noise=79,
                           correlated_claims_hold={"c": True, "a": False}, correlated_collapse={"d": True})
    doc["correlated"] = {"settings": {"c": {"kind": "correlated"}, "a": {"kind": "anticorrelated"},
                                      "d": {"kind": "correlated"}}}
    _write(tmp_path, "metrics/superposition.json", doc)
    text = render(tmp_path)
    assert "D_i makes 4 jumps between fractions over training that clear the curve's own noise (and 79 smaller " \
           "moves within it)." in text
    assert ("correlated features orthogonal within their group (holds); anti-correlated features antipodal "
            "(does not hold); denser correlated features collapsed onto their principal component (holds, d)") in text


def _supporting(criterion_rows: list[dict]) -> dict:
    """The least of metrics/supporting.json the family's sentences read."""
    import numpy as np

    from tinylens.measures import mean_test
    from tinylens.supporting.contributions import contributions_section

    cols = {"block": np.zeros(4, dtype=np.int8), "sa_norm": np.ones(4), "ffwd_norm": np.ones(4),
            "norm_ratio": np.array([2.0, 3.0, 0.5, 4.0]), "cos_ffwd_sa": np.array([0.1, 0.2, 0.0, 0.1]),
            "cos_ffwd_out": np.ones(4), "cos_sa_out": np.zeros(4)}
    difference = [{"block": 0, "over_seeds": mean_test([0.4, 0.3, 0.5]), "per_seed": {"1": {}, "2": {}, "3": {}}}]
    return {"ablation": {"comparison": {"paper": [{"block": 0, "one_token_drop_ffwd": 0.5, "one_token_drop_sa": 0.1}]},
                         "ffwd_minus_sa": {"paper": {"one_token": difference}}},
            "criterion": {"comparison": {"paper": criterion_rows}},
            "attention_vs_ffwd": contributions_section({"paper": cols}, 1, {"vocab_size": 5, "block_size": 4,
                                                                           "d_model": 8, "n_layer": 1}),
            "token_subspaces": {"a_at_ln_f_input": {"sigma_ratio": None},
                                "stages": {"6": {"tokens": 65, "tokens_converged": 61, "tokens_reached": 0}}},
            "ffwd_endpoint": {}}


def test_the_criterion_sentence_states_its_prompts_and_its_null():
    """The criterion is stated at the last block that has rates, over the prompts it used, and placed against its
    permutation null by the data; with no block rated (every prompt left out) there is no criterion sentence."""
    from tinylens.supporting.summary import findings as supporting_findings

    rated = {"block": 4, "end_of_model_abs": 70.0, "end_of_model_permutation_null_abs": 40.0,
             "end_of_model_permutation_null_abs_std": 3.0, "end_of_model_used": 480,
             "end_of_model_excluded_unconverged": 20}
    text = " ".join(supporting_findings({"supporting": _supporting([{"block": 5}, rated])}))
    assert ("The criterion (every top token within the first half by |cos|) holds for 70% of the 480 prompts at "
            "block 5 with end-of-model subspaces (20 left out for a top token whose subspace did not converge), "
            "above its permutation null (40% +- 3).") in text
    within = " ".join(supporting_findings({"supporting": _supporting([{**rated, "end_of_model_abs": 44.0}])}))
    assert "within two standard deviations of its permutation null" in within
    assert "The criterion" not in " ".join(supporting_findings({"supporting": _supporting([{"block": 5}])}))
    assert "At the input of ln_f, 61 of 65 token subspaces converged" in text


def test_the_criterion_at_each_blocks_own_threshold_stands_beside_the_jointly_tuned_one():
    """method.md §6b: the block-alone rates, read from the criterion files into supporting.json, and said beside the
    joint ones, blocks counted from 1."""
    from tinylens.supporting.summary import criterion_section
    from tinylens.supporting.summary import findings as supporting_findings

    def rates(rate):
        return {"end_of_model": {"rate_abs": rate, "rate_signed": rate, "chance_exact": 10.0, "used": 100, "empty": 0,
                                 "permutation_null_abs": {"mean": 12.0, "std": 2.0}}}

    per_mode = {"paper": {"blocks": {"0": rates(30.0), "1": rates(8.0)},
                          "block_alone": {"0": rates(55.0), "1": rates(41.5)},
                          "thresholds": {"joint": [0.95, 0.73], "block_alone": [0.9, 0.96]}}}
    section = criterion_section(per_mode, 2)
    rows = {r["block"]: r for r in section["comparison"]["paper"]}
    assert rows[1]["end_of_model_abs_block_alone"] == 41.5 and rows[1]["end_of_model_abs"] == 8.0
    assert (rows[1]["joint_threshold"], rows[1]["block_alone_threshold"]) == (0.73, 0.96)
    text = " ".join(supporting_findings({"supporting": _supporting(section["comparison"]["paper"])}))
    assert ("At each block's own best threshold (where the block alone approximates the model best on the tuning "
            "prompts: 0.9, 0.96) instead of the jointly tuned one (0.95, 0.73), the criterion holds for 55%, 41.5% of "
            "the paper prompts at blocks 1 to 2 (at the joint thresholds: 30%, 8%, end-of-model subspaces).") in text
    earlier = {"paper": {"blocks": per_mode["paper"]["blocks"]}}  # a criterion file of an earlier run
    assert "end_of_model_abs_block_alone" not in criterion_section(earlier, 2)["comparison"]["paper"][0]


def test_the_findings_open_with_the_one_convention(tmp_path):
    from tinylens.wording import CONVENTION

    _write(tmp_path, "metrics/superposition.json", SUPERPOSITION)
    text = findings.findings_document(tmp_path, "small")
    assert text.split("\n\n")[1] == CONVENTION
    assert "counted from 1" in CONVENTION and '"seed 1337" is a random seed' in CONVENTION


def test_no_sentence_of_the_snapshot_says_what_its_numbers_do_not(repo):
    """Every verdict clause README.md's block shows quotes a p that agrees with its words (the default run's
    robustness sentence once said "no different" beside p = 0.017)."""
    from tinylens.wording import disagreements

    assert disagreements(block(repo)) == []
