"""The comparison table of the published numbers (tinylens.comparison): look-ups, spreads, renderings."""

import math
import re

import pytest

from tinylens.comparison import (
    ALL,
    ROWS,
    TABLE_SCHEMA,
    Row,
    Spread,
    Where,
    at,
    compare,
    headline,
    lookup,
    markdown,
    report,
    write_table_csv,
)
from tinylens.tables import read_csv

DOCS = {
    "training": {"models": {"1337": {"val_loss": 1.51, "steps": 4500}, "88": {"val_loss": 1.49, "steps": 4500},
                            "1442": {"val_loss": 1.60, "steps": 5000}}},
    "hellinger": {"paper_values": {"mean": 0.20, "std": 0.1}, "flag": True, "missing": None,
                  "cases": [{"prompt": "And only l", "matches": [94, 40]}, {"prompt": "hing tremb", "matches": [3, 4]}]},
}
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


def row(spread, paper=0.1677, like=MEAN, own=None):
    return Row("r", "§6", "mean H", paper, like, own, spread=spread)


@pytest.mark.parametrize("spread, paper, within, rule", [
    (Spread("paper_std", 0.1215), 0.1677, True, "|difference| <= the paper's std 0.1215"),
    (Spread("paper_std", 0.01), 0.1677, False, "|difference| <= the paper's std 0.01"),
    (Spread("paper_range", (0.16, 0.21)), 0.185, True, "within the paper's range [0.16, 0.21]"),
    (Spread("paper_range", (0.16, 0.19)), 0.175, False, "within the paper's range [0.16, 0.19]"),
    (Spread("lower_bound", 0.2), 0.2, False, "above the paper's bound 0.2"),  # strictly above, as the paper says
    (Spread("lower_bound", 0.1), 0.1, True, "above the paper's bound 0.1"),
    (Spread("exact"), 0.2, True, "equal to the paper's"),
    (Spread("exact"), 0.2001, False, "equal to the paper's"),
    (Spread("seeds", source=at("training", "models", ALL, "val_loss")), 1.5063, True,
     "the paper's value within our seeds' range [1.49, 1.6]"),
    (Spread("seeds", source=at("training", "models", ALL, "val_loss")), 1.48, False,
     "the paper's value within our seeds' range [1.49, 1.6]"),
    (Spread(), 0.1677, None, "no spread reported or computable"),
])
def test_every_kind_of_spread_by_hand(spread, paper, within, rule):
    (t,) = compare([row(spread, paper)], DOCS, {}, FILES)
    assert t["like_for_like"] == 0.20 and t["difference"] == pytest.approx(0.20 - paper)
    assert t["within_spread"] is within and t["spread_rule"] == rule and t["status"] == "computed"


def test_a_missing_source_is_not_computed_with_its_reason_and_judges_nothing():
    absent = {"supporting": "metrics/supporting.json is not made by this workflow (no rule supporting_metrics)"}
    (t,) = compare([row(Spread("paper_std", 0.1), like=at("supporting", "ablation", "x"))], DOCS, absent, FILES)
    assert t["status"] == "not computed" and t["like_for_like"] is None and t["difference"] is None
    assert t["reason"] == absent["supporting"] and t["within_spread"] is None
    assert t["spread_rule"] == "no like-for-like value"


def test_own_value_and_a_value_that_is_not_a_number():
    own = at("hellinger", "paper_values", "std")
    (t,) = compare([row(Spread(), own=own)], DOCS, {}, FILES)
    assert t["own"] == 0.1 and t["own_source"] == "metrics/hellinger_paper.json: paper_values.std"
    (t,) = compare([row(Spread())], DOCS, {}, FILES)
    assert t["own"] is None and t["own_reason"] == "same definition"
    (t,) = compare([row(Spread(), like=at("hellinger", "flag"))], DOCS, {}, FILES)
    assert t["status"] == "not computed" and t["reason"] == "metrics/hellinger_paper.json: flag is True, not a number"


def test_seed_spread_needs_the_seed_values():
    spread = Spread("seeds", source=at("training", "models", ALL, "train_loss"))
    (t,) = compare([row(spread)], DOCS, {}, FILES)
    assert t["within_spread"] is None and "has no key 'train_loss'" in t["spread_rule"]


def test_report_headline_holds_only_marked_rows_and_their_numbers():
    rows = [Row("a", "§6", "a", 0.1677, at("hellinger", "paper_values", "mean"), headline=True,
                spread=Spread("paper_std", 0.1215)),
            Row("b", "§6", "b", 1.0, at("hellinger", "paper_values", "std")),
            Row("c", "§7", "c", 1.0, at("supporting", "x"), headline=True)]
    table = compare(rows, DOCS, {"supporting": "not here"}, FILES)
    assert headline(rows, table) == {"a": {"paper": 0.1677, "like_for_like": 0.2, "difference": pytest.approx(0.0323),
                                           "within_spread": True}, "c": {"paper": 1.0}}
    out = report(rows, table, "test")
    assert out["counts"] == {"rows": 3, "computed": 2, "within_spread": 1, "outside_spread": 0}
    assert [r["id"] for r in out["rows"]] == ["a", "b", "c"] and out["rows"][2]["reason"] == "not here"


def test_csv_and_markdown_renderings(tmp_path):
    rows = [Row("a", "§6", "mean H", 0.1677, at("hellinger", "paper_values", "mean"), spread=Spread("paper_std", 0.1215)),
            Row("c", "§7", "ablation | block 1", 0.7, at("supporting", "x"))]
    table = compare(rows, DOCS, {"supporting": "metrics/supporting.json is not made by this workflow"}, FILES)
    write_table_csv(tmp_path / "t.csv", table)
    back = read_csv(tmp_path / "t.csv", TABLE_SCHEMA).to_pydict()
    missing = back["like_for_like"][1]
    assert back["id"] == ["a", "c"] and back["like_for_like"][0] == 0.2 and (missing is None or math.isnan(missing))
    assert back["within_spread"] == ["yes", ""] and back["status"] == ["computed", "not computed"]
    md = markdown(table).splitlines()
    assert md[0].startswith("| section | quantity | paper | like-for-like | own |") and len(md) == 4
    assert md[2] == "| §6 | mean H | 0.1677 | 0.2 | - | 0.0323 | yes | \\|difference\\| <= the paper's std 0.1215 |"
    assert "not computed: metrics/supporting.json is not made by this workflow" in md[3]
    assert "ablation \\| block 1" in md[3]  # a bare bar inside a cell would split it
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
        if r.spread.kind == "paper_range":  # a range: its ends are published, the midpoint is ours
            assert all(_published(v)[0] in numbers for v in r.spread.value), r.id
            continue
        assert any(text in numbers for text in _published(r.paper)), (r.id, r.paper)


def test_rows_have_unique_ids_and_cover_every_section():
    ids = [r.id for r in ROWS]
    assert len(ids) == len(set(ids))
    assert {r.section for r in ROWS} == {"§1", "§2", "§3", "§6", "§7", "§12"}
    assert sum(r.id.startswith("ablation_") for r in ROWS) == 12
    assert sum(r.id.startswith("criterion_") for r in ROWS) == 6 + 3 + 1
    # the published 1442 model is its 5,000-step checkpoint, the others at 4,500 (method.md §2, §12)
    steps = {r.id: r.paper for r in ROWS if r.id.startswith("published_step_")}
    assert steps == {"published_step_seed1337": 4500, "published_step_seed1442": 5000,
                     "published_step_seed88": 4500, "published_step_seed99999": 4500}
