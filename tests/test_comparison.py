"""The comparison table of the published numbers (tinylens.comparison): look-ups, spreads, renderings."""

import math
import re
from pathlib import Path

import pytest
import yaml

from tinylens.comparison import (
    ALL,
    ROWS,
    TABLE_SCHEMA,
    Row,
    Test,
    Where,
    at,
    compare,
    differences,
    headline,
    lookup,
    markdown,
    report,
    seeds_test,
    write_table_csv,
)
from tinylens.config import resolve_preset
from tinylens.tables import read_csv

DOCS = {
    "training": {"models": {"1337": {"val_loss": 1.51, "steps": 4500}, "88": {"val_loss": 1.49, "steps": 4500},
                            "1442": {"val_loss": 1.60, "steps": 5000}}},
    "hellinger": {"paper_values": {"mean": 0.20, "std": 0.1}, "flag": True, "missing": None,
                  "cases": [{"prompt": "And only l", "matches": [94, 40]}, {"prompt": "hing tremb", "matches": [3, 4]}]},
}
#: the presets of the committed configuration, resolved
CONFIG = yaml.safe_load((Path(__file__).parents[1] / "config/config.yaml").read_text(encoding="utf-8"))
SETTINGS = {name: resolve_preset(CONFIG, name) for name in CONFIG["presets"]}
FILES = {"training": "metrics/training.json", "hellinger": "metrics/hellinger_paper.json"}


@pytest.mark.parametrize("source, expected", [
    (at("training", "models", "88", "val_loss"), 1.49),
    (at("training", "models", ALL, "val_loss"), [1.51, 1.49, 1.60]),
    (at("hellinger", "cases", Where("prompt", "hing tremb"), "matches", 1), 4),
    (at("hellinger", "cases", ALL, "matches", 0), [94, 3]),
])
def test_lookup_follows_keys_records_items_and_all(source, expected):
    assert lookup(DOCS, {}, source, FILES) == (expected, None)


@pytest.mark.parametrize("source, reason", [
    (at("training", "models", "99999", "val_loss"), "metrics/training.json at models has no key '99999'"),
    (at("hellinger", "cases", Where("prompt", "KING RICHA"), "matches"),
     "metrics/hellinger_paper.json at cases has no (single) record with prompt = 'KING RICHA'"),
    (at("hellinger", "cases", Where("prompt", "And only l"), "matches", 2),
     "metrics/hellinger_paper.json at cases.[prompt='And only l'].matches has no item 2"),
    (at("hellinger", "missing"), "metrics/hellinger_paper.json: missing is null"),
    (at("supporting", "headline"), "metrics/supporting.json is not made by this workflow"),
    (at("elsewhere", "x"), "no metrics document named 'elsewhere' was given"),
])
def test_lookup_says_why_a_value_is_missing(source, reason):
    absent = {"supporting": "metrics/supporting.json is not made by this workflow"}
    assert lookup(DOCS, absent, source, FILES) == (None, reason)


MEAN = at("hellinger", "paper_values", "mean")
STATS = at("hellinger", "paper_values")


def row(spread, paper=0.1677, like=MEAN, own=None, needs=frozenset()):
    return Row("r", "§6", "mean H", paper, like, own, spread=spread, needs=needs)


def means_row(ours_mean, ours_std, ours_n, paper_mean=0.1677, paper_std=0.1215, paper_n=20_000):
    docs = {"h": {"s": {"mean": ours_mean, "std": ours_std, "n": ours_n}}}
    r = Row("m", "§6", "mean H", paper_mean, at("h", "s", "mean"), spread=Test("means", (paper_std, paper_n),
                                                                              at("h", "s")))
    (t,) = compare([r], docs)
    return t


def _se(ours_std=0.12, ours_n=500, paper_std=0.1215, paper_n=20_000):
    return math.sqrt(ours_std**2 / ours_n + paper_std**2 / paper_n)


def test_means_ten_standard_errors_apart_differ():
    t = means_row(0.1677 + 10 * _se(), 0.12, 500)
    assert t["verdict"] == "differs" and t["statistic"] == pytest.approx(10) and t["p_value"] < 1e-20
    assert t["ci_low"] == pytest.approx(10 * _se() - 1.959964 * _se(), rel=1e-5)
    assert "z = 10.00" in t["test"] and "two-sided at 0.05" in t["test"]


def test_means_half_a_standard_error_apart_are_consistent():
    t = means_row(0.1677 - 0.5 * _se(), 0.12, 500)
    assert t["verdict"] == "consistent" and t["statistic"] == pytest.approx(-0.5)
    assert t["p_value"] == pytest.approx(0.617075, abs=1e-5)  # 2 (1 - Phi(0.5))
    assert t["ci_low"] < 0 < t["ci_high"]


def test_the_like_for_like_hellinger_of_a_different_model_is_not_comparable():
    """The small preset's model is not the paper's, so its like-for-like Hellinger (the paper's prompts, thresholds
    and weights on our model: 0.2376 over 500 prompts) is not comparable, with the model's difference as the
    reason; on the paper's own model the same numbers would be a z-test, about 13 standard errors away."""
    docs = {"paper_prompts": {"paper_values": {"mean": 0.2376, "std": 0.12, "n": 500}, "alternates": {
        "1442": {"mean": 0.15, "std": 0.1, "n": 500}}}}
    rows = [r for r in ROWS if r.id in ("hellinger_mean", "alternate_1442_mean")]
    small = differences(SETTINGS["small"], SETTINGS["paper"])
    for t in compare(rows, docs, differ=small):
        assert t["verdict"] == "not comparable" and t["test"].startswith("not comparable: a different model: ")
    (t,) = compare(rows[:1], docs, differ={})
    assert t["verdict"] == "differs" and t["statistic"] > 10 and t["ci_low"] > 0.05
    assert all("model" in r.needs for r in ROWS if r.id.startswith(("hellinger_", "alternate_")))


def test_every_kind_of_test_by_hand():
    for spread, paper, verdict, rule in [
        (Test("paper_range", (0.16, 0.21)), 0.185, "consistent", "inside the paper's stated range [0.16, 0.21] or not"),
        (Test("paper_range", (0.16, 0.19)), 0.175, "differs", "inside the paper's stated range [0.16, 0.19] or not"),
        (Test("lower_bound", 0.2), 0.2, "differs", "above the paper's stated bound 0.2 or not"),  # strictly above
        (Test("lower_bound", 0.1), 0.1, "consistent", "above the paper's stated bound 0.1 or not"),
        (Test("exact"), 0.2, "consistent", "exact: equal to the paper's or not"),
        (Test("exact"), 0.2001, "differs", "exact: equal to the paper's or not"),
        (Test(), 0.1677, "no spread", "no spread reported or computable"),
    ]:
        (t,) = compare([row(spread, paper)], DOCS, {}, FILES)
        assert t["like_for_like"] == 0.20 and t["difference"] == pytest.approx(0.20 - paper)
        assert (t["verdict"], t["test"], t["status"]) == (verdict, rule, "computed")


def test_seeds_test_against_the_seeds_mean_and_standard_error():
    seeds = Test("seeds", source=at("training", "models", ALL, "val_loss"))  # 1.51, 1.49, 1.60: mean 1.5333
    (t,) = compare([row(seeds, 1.5063)], DOCS, {}, FILES)
    assert t["verdict"] == "consistent" and t["statistic"] == pytest.approx(0.7997, abs=1e-3)  # se 0.03383, 2 df
    assert "one-sample t-test over 3 seeds" in t["test"] and "(2 df)" in t["test"]
    (t,) = compare([row(seeds, 1.2)], DOCS, {}, FILES)
    assert t["verdict"] == "differs" and t["p_value"] < 0.05
    assert seeds_test([1.0], 1.0).verdict == "no spread"


def test_a_row_whose_setup_differs_is_not_comparable_with_the_reason():
    differ = {"model": "a different model: n_embed 64 (the paper: 384)", "prompts": "500 of the paper's 20000 prompts"}
    (t,) = compare([row(Test("exact"), 0.2, needs=frozenset({"model"}))], DOCS, {}, FILES, differ)
    assert t["verdict"] == "not comparable" and t["test"] == "not comparable: " + differ["model"]
    (t,) = compare([row(Test("exact"), 0.2, needs=frozenset({"data"}))], DOCS, {}, FILES, differ)
    assert t["verdict"] == "consistent"


def test_differences_between_presets():
    assert differences(SETTINGS["paper"], SETTINGS["paper"]) == {}
    small = differences(SETTINGS["small"], SETTINGS["paper"])
    assert set(small) == {"model", "prompts"} and "n_embed 64 (the paper: 384)" in small["model"]
    assert small["prompts"] == "500 of the paper's 20000 prompts"
    assert set(differences(SETTINGS["test"], SETTINGS["paper"])) == {"model", "data", "prompts"}
    # the small preset's loss, ablation, criterion and case-study rows are not comparable by construction
    kinds = ("val_loss_", "ablation_", "criterion_", "and_only_l_", "hing_tremb_")
    assert all("model" in r.needs for r in ROWS if r.id.startswith(kinds))


def test_a_missing_source_is_not_computed_with_its_reason_and_judges_nothing():
    absent = {"supporting": "metrics/supporting.json is not made by this workflow (no rule supporting_metrics)"}
    (t,) = compare([row(Test("exact"), like=at("supporting", "ablation", "x"))], DOCS, absent, FILES)
    assert t["status"] == "not computed" and t["like_for_like"] is None and t["difference"] is None
    assert t["reason"] == absent["supporting"] and t["verdict"] == "not computed"
    assert t["test"] == "no like-for-like value"


def test_own_value_and_a_value_that_is_not_a_number():
    own = at("hellinger", "paper_values", "std")
    (t,) = compare([row(Test(), own=own)], DOCS, {}, FILES)
    assert t["own"] == 0.1 and t["own_source"] == "metrics/hellinger_paper.json: paper_values.std"
    (t,) = compare([row(Test())], DOCS, {}, FILES)
    assert t["own"] is None and t["own_reason"] == "same definition"
    (t,) = compare([row(Test(), like=at("hellinger", "flag"))], DOCS, {}, FILES)
    assert t["status"] == "not computed" and t["reason"] == "metrics/hellinger_paper.json: flag is True, not a number"


def test_tests_need_their_numbers():
    (t,) = compare([row(Test("seeds", source=at("training", "models", ALL, "train_loss")))], DOCS, {}, FILES)
    assert t["verdict"] == "no spread" and "has no key 'train_loss'" in t["test"]
    (t,) = compare([row(Test("means", (0.1, 100), STATS))], DOCS, {}, FILES)  # paper_values has no n
    assert t["verdict"] == "no spread" and "has no mean, std and n" in t["test"]


def test_report_counts_verdicts_and_headline_holds_only_marked_rows():
    rows = [Row("a", "§6", "a", 0.1677, at("hellinger", "paper_values", "mean"), headline=True, spread=Test("exact")),
            Row("b", "§6", "b", 1.0, at("hellinger", "paper_values", "std")),
            Row("c", "§7", "c", 1.0, at("supporting", "x"), headline=True)]
    table = compare(rows, DOCS, {"supporting": "not here"}, FILES)
    assert headline(rows, table) == {"a": {"paper": 0.1677, "like_for_like": 0.2, "difference": pytest.approx(0.0323),
                                           "verdict": "differs"}, "c": {"paper": 1.0, "verdict": "not computed"}}
    out = report(rows, table, "test")
    assert out["counts"] == {"rows": 3, "consistent": 0, "differs": 1, "not comparable": 0, "no spread": 1,
                             "not computed": 1, "ours_only": 0}
    assert [r["id"] for r in out["rows"]] == ["a", "b", "c"] and out["rows"][2]["reason"] == "not here"


def test_csv_and_markdown_renderings(tmp_path):
    rows = [Row("a", "§6", "mean H", 0.1677, at("hellinger", "paper_values", "mean"), spread=Test("exact")),
            Row("c", "§7", "ablation | block 1", 0.7, at("supporting", "x"))]
    table = compare(rows, DOCS, {"supporting": "metrics/supporting.json is not made by this workflow"}, FILES)
    write_table_csv(tmp_path / "t.csv", table)
    back = read_csv(tmp_path / "t.csv", TABLE_SCHEMA).to_pydict()
    missing = back["like_for_like"][1]
    assert back["id"] == ["a", "c"] and back["like_for_like"][0] == 0.2 and (missing is None or math.isnan(missing))
    assert back["verdict"] == ["differs", "not computed"] and back["status"] == ["computed", "not computed"]
    md = markdown(table).splitlines()
    assert md[0] == "consistent: 0, differs: 1, not comparable: 0, no spread: 0, not computed: 1 (of 2 rows)"
    assert md[2].startswith("| section | quantity | paper | like-for-like | own |") and len(md) == 6
    assert md[4] == "| §6 | mean H | 0.1677 | 0.2 | - | 0.0323 | differs | exact: equal to the paper's or not |"
    assert "not computed: metrics/supporting.json is not made by this workflow" in md[5]
    assert "ablation \\| block 1" in md[5]  # a bare bar inside a cell would split it
    from tinylens.comparison import _cell

    assert [_cell(v) for v in (1.5063, 23.1262, 10_788_929.0, 0.00012345, -0.3047250001, 2.0)] == \
        ["1.5063", "23.1262", "10,788,929", "0.000123", "-0.3047", "2"]


def _published(value: float) -> list[str]:
    """The ways method.md writes a number: 0.1677, 0.71, 38.80, 4,500, 10,788,929."""
    if float(value).is_integer():
        return [f"{int(value):,}", str(int(value))]
    text = f"{value:.4f}".rstrip("0")
    return [text, text.rstrip("."), f"{value:.2f}"]


def test_every_paper_value_is_the_number_method_md_publishes(repo):
    method = (repo / "docs/method.md").read_text(encoding="utf-8")
    numbers = set(re.findall(r"\d[\d,]*(?:\.\d+)?", method))
    for r in ROWS:
        if r.paper is None:  # a row of ours only publishes nothing
            continue
        if r.spread.kind == "paper_range":  # a range: its ends are published, the midpoint is ours
            assert all(_published(v)[0] in numbers for v in r.spread.value), r.id
            continue
        assert any(text in numbers for text in _published(r.paper)), (r.id, r.paper)


def test_rows_have_unique_ids_and_cover_every_section():
    ids = [r.id for r in ROWS]
    assert len(ids) == len(set(ids))
    assert {r.section for r in ROWS if r.paper is not None} == {"§1", "§2", "§3", "§6", "§7", "§12"}
    assert {r.section for r in ROWS if r.paper is None} == {"§6b"}
    assert sum(r.id.startswith("ablation_") for r in ROWS) == 12
    assert sum(r.id.startswith("criterion_") for r in ROWS) == 6 + 3 + 1
    # the published 1442 model is its 5,000-step checkpoint, the others at 4,500 (method.md §2, §12)
    steps = {r.id: r.paper for r in ROWS if r.id.startswith("published_step_")}
    assert steps == {"published_step_seed1337": 4500, "published_step_seed1442": 5000,
                     "published_step_seed88": 4500, "published_step_seed99999": 4500}


def test_rows_of_ours_only_carry_their_own_paired_test_and_are_not_counted_among_the_verdicts():
    from tinylens.comparison import OURS_ONLY

    paired = {"mean": 0.21, "reference": "ffwd_out", "verdict": "ffwd_out better",
              "versus_ffwd_out": {"mean_difference": 0.04, "ci_low": 0.03, "ci_high": 0.05, "p": 1e-9, "t": 8.1, "n": 500}}
    docs = {**DOCS, "controls": {"modes": {"heldout": {"sources": {"suffix": paired}},
                                           "paper": {"sources": {"suffix": {"mean": 0.1}}}}}}
    rows = [Row("a", "§6", "mean H", 0.1677, at("hellinger", "paper_values", "mean"), spread=Test("exact")),
            Row("s", "§6b", "control: suffix", None, at("controls", "modes", "paper", "sources", "suffix", "mean"),
                at("controls", "modes", "heldout", "sources", "suffix", "mean"),
                spread=Test("ours", source=at("controls", "modes", "heldout", "sources", "suffix"))),
            Row("n", "§6b", "control: none", None, at("controls", "x"))]
    table = compare(rows, docs, {}, FILES)
    s = table[1]
    assert s["verdict"] == OURS_ONLY and s["paper"] is None and s["difference"] is None
    assert (s["like_for_like"], s["own"]) == (0.1, 0.21)
    assert (s["statistic"], s["p_value"], s["ci_low"], s["ci_high"]) == (8.1, 1e-9, 0.03, 0.05)
    assert "paired t-test against ffwd_out" in s["test"] and s["test"].endswith("ffwd_out better")
    assert table[2]["verdict"] == OURS_ONLY and table[2]["status"] == "not computed"
    out = report(rows, table, "test")
    assert out["counts"]["rows"] == 1 and out["counts"]["ours_only"] == 2 and out["counts"]["differs"] == 1
    md = markdown(table)
    assert md.splitlines()[0].endswith("(of 1 rows)") and "Ours only (2 rows, no published number" in md
    assert md.index("| §6 |") < md.index("Ours only") < md.index("| §6b |")
    from tinylens.comparison import findings

    sentence = findings({"comparison": out})[0]
    assert sentence.startswith("Of the 1 published numbers,") and "also lists 2 numbers of ours only" in sentence
