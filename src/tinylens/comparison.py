"""Every published number of method.md beside ours, in one table (method.md §12).

Each :class:`Row` names a published number and where our two values of it are found:

- **like-for-like**: computed the way the paper computed it (its prompts, its thresholds and
  weights, its definitions: method.md §12);
- **own**: our own definition where it differs (held-out evaluation prompts, tuned values,
  full-context ablation, sign-aware ranks, centred SVD); empty where the definitions agree.

A value is a :class:`Source`: a named metrics document (a JSON file the workflow writes; the rule
maps names to files) and a key path into it. The table says for every row whether the
like-for-like value lies within the paper's reported spread (its std or range, a bound it states)
or, where it gives none, whether the paper's value lies within the range of our seeds' values
(:class:`Spread`). A row whose document is not made by this workflow, or lacks the key, is listed
as *not computed* with the reason, never dropped: adding a source is adding its name to the rule's
mapping, and its rows are already here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from tinylens.approx import PAPER_REFERENCE
from tinylens.supporting import published
from tinylens.tables import Schema, write_csv

#: The prompt mode of the supporting analyses' like-for-like values (the paper's own prompts).
SUPPORTING_MODE = "paper"
#: A key that takes every entry of a mapping (or list) at that level: the values over our seeds.
ALL = "*"


@dataclass(frozen=True)
class Where:
    """A key into a list of records: the record whose ``key`` equals ``value``."""

    key: str
    value: object

    def __str__(self) -> str:
        return f"[{self.key}={self.value!r}]"


Key = str | int | Where


@dataclass(frozen=True)
class Source:
    """A value in a metrics document: its name and the keys leading to it."""

    name: str
    path: tuple[Key, ...]

    def describe(self, files: Mapping[str, str]) -> str:
        return f"{files.get(self.name, self.name)}: " + ".".join(str(k) for k in self.path)


def at(name: str, *path: Key) -> Source:
    return Source(name, tuple(path))


@dataclass(frozen=True)
class Spread:
    """How a row's agreement is judged.

    ``paper_std``: |like-for-like - paper| <= the paper's std (``value``); ``paper_range``: the
    like-for-like value lies in the paper's range ``value = (lo, hi)``; ``lower_bound``: it exceeds
    the bound the paper states; ``exact``: it equals the paper's; ``seeds``: the paper's value lies
    within the range of our seeds' values (``source``: a path through :data:`ALL`, or one giving a
    ``[lo, hi]`` pair); ``none``: nothing to judge by.
    """

    kind: str = "none"
    value: float | tuple[float, float] | None = None
    source: Source | None = None


NO_SPREAD = Spread()


@dataclass(frozen=True)
class Row:
    id: str
    section: str
    quantity: str
    paper: float
    like_for_like: Source
    own: Source | None = None
    spread: Spread = field(default=NO_SPREAD)
    headline: bool = False
    note: str = ""


# --- the published numbers (method.md §1-3, §6, §7, §12) ---------------------------------------------

PAPER_SEEDS = ("1337", "1442", "88", "99999")
#: §2: (train, val) loss of each published model, and the step it was taken at.
LOSSES = {"1337": (0.9334, 1.5063), "1442": (0.9293, 1.5038), "88": (0.9294, 1.4991), "99999": (0.9339, 1.4941)}
PUBLISHED_STEPS = {"1337": 4500, "1442": 5000, "88": 4500, "99999": 4500}
#: §6: the approximation vs the model over the paper's prompts with its values.
HELLINGER = {"mean": PAPER_REFERENCE["approximation_mean"], "std": PAPER_REFERENCE["approximation_std"],
             "min": 0.0013, "max": 0.9994}
#: §6: each alternate vs the original, (mean, std).
ALTERNATES = {"1442": (0.1064, 0.0823), "88": (0.1057, 0.0817), "99999": (0.1053, 0.0828)}
#: §6 case studies, block 1 alone at three thresholds: (strings above it, H).
AND_ONLY_L_BLOCK1 = {"0.95": (94, 0.071), "0.90": (612, 0.286), "0.97": (33, 0.150)}
AND_ONLY_L_ALL_BLOCKS = {"matches": (94, 47, 70, 108, 175, 2237), "hellinger": 0.073}
HING_TREMB = {"block1_only": 0.63, "all_blocks": 0.023}
#: §7 and §12: one definition, in the supporting family (0-based blocks there; 1-based here).
ABLATION = {variant: tuple(by_block[b] for b in sorted(by_block)) for variant, by_block in published.ABLATION.items()}
CRITERION_END_OF_MODEL = tuple(published.CRITERION_END_OF_MODEL[b] for b in sorted(published.CRITERION_END_OF_MODEL))
CRITERION_SAME_STAGE = {b + 1: value for b, value in published.CRITERION_SAME_STAGE.items()}
CRITERION_CHANCE_PERCENT = published.CRITERION_CHANCE_PERCENT
SUBSPACE_SIGMA_RATIO_ABOVE = published.SUBSPACE_SIGMA_RATIO["sigma_ratio_more_than"]
FINAL_LAYERNORM = {key: published.FINAL_LAYERNORM[key] for key in ("mean_output_norm", "mean_output_norm_scaled")}


def _loss_rows() -> list[Row]:
    rows = []
    for seed in PAPER_SEEDS:
        rows.append(Row(
            f"published_step_seed{seed}", "§2", f"training step of the published model, seed {seed}",
            PUBLISHED_STEPS[seed], at("training", "models", seed, "steps"), spread=Spread("exact"),
            note="the paper preset trains each seed to its published step; smaller presets train fewer"))
        for i, split in enumerate(("train", "val")):
            rows.append(Row(
                f"{split}_loss_seed{seed}", "§2", f"{split} loss, seed {seed}", LOSSES[seed][i],
                at("training", "models", seed, f"{split}_loss"),
                spread=Spread("seeds", source=at("training", "models", ALL, f"{split}_loss")),
                headline=seed == "1337" and split == "val",
                note="the same estimate (random batches per split) in both definitions"))
    return rows


def _hellinger_rows() -> list[Row]:
    rows = []
    for stat, value in HELLINGER.items():
        rows.append(Row(
            f"hellinger_{stat}", "§6", f"approximation vs model, {stat} of H over the prompts", value,
            at("paper_prompts", "paper_values", stat), at("heldout", "approximation", stat),
            spread=Spread("paper_std", HELLINGER["std"]) if stat == "mean" else NO_SPREAD, headline=stat in ("mean", "std"),
            note="like-for-like: the paper's prompts, thresholds and weights, in-sample; own: held-out evaluation "
                 "prompts, thresholds and weights tuned on the held-out tuning prompts"))
    rows.append(Row(
        "hellinger_mean_tuned_values", "§6", "approximation vs model, mean H, our tuned values on the paper's prompts",
        HELLINGER["mean"], at("paper_prompts", "approximation", "mean"), at("corpus", "approximation", "mean"),
        spread=Spread("paper_std", HELLINGER["std"]), headline=True,
        note="for reference: the paper's prompts with the values tuned on the corpus mode's tuning prompts; own: the "
             "corpus mode's evaluation prompts"))
    for seed, (mean, std) in ALTERNATES.items():
        rows.append(Row(
            f"alternate_{seed}_mean", "§6", f"seed {seed} vs the original, mean H", mean,
            at("paper_prompts", "alternates", seed, "mean"), at("heldout", "alternates", seed, "mean"),
            spread=Spread("paper_std", std), headline=True,
            note="like-for-like: the paper's prompts; own: the held-out evaluation prompts"))
        rows.append(Row(
            f"alternate_{seed}_std", "§6", f"seed {seed} vs the original, std of H", std,
            at("paper_prompts", "alternates", seed, "std"), at("heldout", "alternates", seed, "std")))
    return rows


def _case_study_rows() -> list[Row]:
    rows = []
    and_only_l = Where("prompt", "And only l")
    for t, (matches, h) in AND_ONLY_L_BLOCK1.items():
        for what, value in (("matches", matches), ("hellinger", h)):
            rows.append(Row(
                f"and_only_l_block1_{t}_{what}", "§6", f"'And only l', block 1 alone at {t}: "
                + ("strings above the threshold" if what == "matches" else "H"), value,
                at("case_studies", "case_studies", and_only_l, "block0_only", t, what),
                note="the paper's model and ours differ in detail (method.md §6)"))
    for b, matches in enumerate(AND_ONLY_L_ALL_BLOCKS["matches"]):
        rows.append(Row(
            f"and_only_l_block{b + 1}_matches", "§6", f"'And only l', all blocks: strings above block {b + 1}'s "
            "threshold", matches, at("case_studies", "case_studies", and_only_l, "paper_values", "matches", b),
            at("case_studies", "case_studies", and_only_l, "tuned", "matches", b),
            note="like-for-like: the paper's thresholds; own: our tuned thresholds"))
    rows.append(Row(
        "and_only_l_all_blocks_hellinger", "§6", "'And only l', all blocks: H", AND_ONLY_L_ALL_BLOCKS["hellinger"],
        at("case_studies", "case_studies", and_only_l, "paper_values", "hellinger"),
        at("case_studies", "case_studies", and_only_l, "tuned", "hellinger"),
        note="like-for-like: the paper's thresholds and weights; own: our tuned ones"))
    hing_tremb = Where("prompt", "hing tremb")
    rows.append(Row(
        "hing_tremb_block1_hellinger", "§6", "'hing tremb', block 1 alone: H", HING_TREMB["block1_only"],
        at("case_studies", "case_studies", hing_tremb, "block0_only", "0.95", "hellinger"),
        note="at 0.95, the paper's block-1 threshold (the paper does not restate it for this prompt)"))
    rows.append(Row(
        "hing_tremb_all_blocks_hellinger", "§6", "'hing tremb', all blocks: H", HING_TREMB["all_blocks"],
        at("case_studies", "case_studies", hing_tremb, "paper_values", "hellinger"),
        at("case_studies", "case_studies", hing_tremb, "tuned", "hellinger"),
        note="like-for-like: the paper's thresholds and weights; own: our tuned ones"))
    return rows


def _supporting_rows(mode: str = SUPPORTING_MODE) -> list[Row]:
    """§7 and §12 from the supporting analyses' metrics (``metrics/supporting.json``)."""
    rows = []
    for variant, values in ABLATION.items():
        for b, value in enumerate(values, start=1):
            block = ("ablation", "comparison", mode, Where("block", b))
            rows.append(Row(
                f"ablation_{variant}_block{b}", "§7", f"ablation, {variant.replace('_', '-')} in block {b}: mean H",
                value, at("supporting", *block, f"one_token_{variant}"), at("supporting", *block, f"full_{variant}"),
                spread=Spread("seeds", source=at("supporting", *block, f"one_token_{variant}_seed_range")),
                headline=b == 1,
                note="like-for-like: the one-token continuation (the paper's code); own: the full-context intervention"))
    for b, value in enumerate(CRITERION_END_OF_MODEL, start=1):
        block = ("criterion", "comparison", mode, Where("block", b))
        rows.append(Row(
            f"criterion_end_of_model_block{b}", "§7", f"criterion, end-of-model subspaces, block {b}: % of prompts",
            value, at("supporting", *block, "end_of_model_abs"), at("supporting", *block, "end_of_model_signed"),
            headline=b == 6, note="like-for-like: ranks by |cos| (the notebooks); own: sign-aware ranks"))
    for b, value in CRITERION_SAME_STAGE.items():
        block = ("criterion", "comparison", mode, Where("block", b))
        rows.append(Row(
            f"criterion_same_stage_block{b}", "§7", f"criterion, same-stage subspaces, block {b}: % of prompts",
            value, at("supporting", *block, "same_stage_abs"), at("supporting", *block, "same_stage_signed"),
            note="like-for-like: ranks by |cos|; own: sign-aware ranks"))
    block6 = ("criterion", "comparison", mode, Where("block", 6))
    rows.append(Row(
        "criterion_chance_block6", "§7", "criterion's chance level, block 6, end-of-model: % of prompts",
        sum(CRITERION_CHANCE_PERCENT) / 2, at("supporting", *block6, "end_of_model_permutation_null_abs"),
        at("supporting", *block6, "end_of_model_chance_exact"), spread=Spread("paper_range", CRITERION_CHANCE_PERCENT),
        note="the paper drew iid cosines from a kernel density fit (16-21%); like-for-like here: the permutation "
             "null, which keeps the real cosines exactly; own: the exact formula C(k, n) / C(V, n)"))
    rows.append(Row(
        "subspace_sigma_ratio_a", "§7", "token subspace of 'a' at the input of ln_f: sigma_1 / sigma_2",
        SUBSPACE_SIGMA_RATIO_ABOVE, at("supporting", "token_subspaces", "a_at_ln_f_input", "sigma_ratio"),
        at("supporting", "token_subspaces", "a_at_ln_f_input", "sigma_ratio_centred"),
        spread=Spread("lower_bound", SUBSPACE_SIGMA_RATIO_ABOVE),
        note="the paper states sigma_1 > 6 sigma_2; like-for-like: uncentred SVD (the notebooks); own: centred"))
    for key, value in FINAL_LAYERNORM.items():
        rows.append(Row(
            f"final_layernorm_{key}", "§12", "final LayerNorm, last block's output "
            + ("scaled by 10" if key.endswith("scaled") else "unscaled") + ": mean ln_f output norm", value,
            at("supporting", "final_layernorm", "modes", mode, "scaling", "10", key),
            note="the paper: its first 1,000 prompts; ours: every prompt of the mode; the norm depends on the "
                 "model's ln_f gain, so only the scaled-vs-unscaled agreement carries over"))
    return rows


ROWS: tuple[Row, ...] = (
    Row("n_params", "§1", "parameters of the model", 10_788_929, at("original_model", "n_params"),
        spread=Spread("exact"), note="exact at the paper preset's shape; smaller presets have smaller models"),
    Row("n_strings", "§3", "unique substrings of length 10", 858_923, at("verification", "paper", "strings"),
        spread=Spread("exact"), note="the strings the paper mode searched; the test preset uses a slice of the text"),
    *_loss_rows(),
    *_hellinger_rows(),
    *_case_study_rows(),
    *_supporting_rows(),
)


# --- looking values up --------------------------------------------------------------------------------

def lookup(documents: Mapping[str, object], absent: Mapping[str, str], source: Source,
           files: Mapping[str, str] | None = None):
    """``(value, None)`` or ``(None, reason)``: the value at ``source`` (a list where the path goes through
    :data:`ALL`). ``absent``: documents this workflow does not make, with the reason."""
    files = files or {}
    if source.name in absent:
        return None, absent[source.name]
    if source.name not in documents:
        return None, f"no metrics document named {source.name!r} was given"
    node = documents[source.name]
    for i, key in enumerate(source.path):
        where = f"{files.get(source.name, source.name)} at {'.'.join(str(k) for k in source.path[:i]) or 'the top'}"
        if key == ALL:
            rest = Source(source.name, source.path[i + 1:])
            items = node.values() if isinstance(node, Mapping) else node if isinstance(node, list) else None
            if items is None:
                return None, f"{where} is not a mapping or list"
            values = []
            for item in items:
                value, reason = lookup({source.name: item}, {}, rest, files)
                if reason is not None:
                    return None, reason
                values.append(value)
            return values, None
        if isinstance(key, Where):
            found = [r for r in node if isinstance(r, Mapping) and r.get(key.key) == key.value] \
                if isinstance(node, list) else []
            if len(found) != 1:
                return None, f"{where} has no (single) record with {key.key} = {key.value!r}"
            node = found[0]
        elif isinstance(key, int):
            if not isinstance(node, list) or not -len(node) <= key < len(node):
                return None, f"{where} has no item {key}"
            node = node[key]
        else:
            if not isinstance(node, Mapping) or key not in node:
                return None, f"{where} has no key {key!r}"
            node = node[key]
    if node is None:
        return None, f"{source.describe(files)} is null"
    return node, None


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def judge(row: Row, like_for_like: float | None, documents: Mapping[str, object], absent: Mapping[str, str],
          files: Mapping[str, str] | None = None) -> tuple[bool | None, str]:
    """Whether the like-for-like value agrees with the paper's by the row's :class:`Spread`, and the rule
    (or why it cannot be judged)."""
    spread = row.spread
    if spread.kind == "none":
        return None, "no spread reported or computable"
    if like_for_like is None:
        return None, "no like-for-like value"
    if spread.kind == "paper_std":
        return bool(abs(like_for_like - row.paper) <= spread.value), f"|difference| <= the paper's std {spread.value:g}"
    if spread.kind == "paper_range":
        lo, hi = spread.value
        return bool(lo <= like_for_like <= hi), f"within the paper's range [{lo:g}, {hi:g}]"
    if spread.kind == "lower_bound":
        return bool(like_for_like > spread.value), f"above the paper's bound {spread.value:g}"
    if spread.kind == "exact":
        return bool(like_for_like == row.paper), "equal to the paper's"
    if spread.kind == "seeds":
        values, reason = lookup(documents, absent, spread.source, files)
        numbers = [_number(v) for v in values] if isinstance(values, list) else []
        if reason is not None or len(numbers) < 2 or None in numbers:
            return None, f"our seeds' range: {reason or f'{values!r} is not a list of seed values'}"
        lo, hi = min(numbers), max(numbers)
        return bool(lo <= row.paper <= hi), f"the paper's value within our seeds' range [{lo:.4g}, {hi:.4g}]"
    raise ValueError(f"row {row.id}: unknown spread kind {spread.kind!r}")


def compare(rows: Sequence[Row], documents: Mapping[str, object], absent: Mapping[str, str] | None = None,
            files: Mapping[str, str] | None = None) -> list[dict]:
    """The table: one record per row (keys of :data:`TABLE_SCHEMA`, values None where missing).

    documents: name -> parsed metrics document; absent: name -> why this workflow has no such document;
    files: name -> its path, for the table's source column.
    """
    absent, files = absent or {}, files or {}
    table = []
    for row in rows:
        value, reason = lookup(documents, absent, row.like_for_like, files)
        like = _number(value)
        if value is not None and like is None:
            reason = f"{row.like_for_like.describe(files)} is {value!r}, not a number"
        own, own_reason = (None, "same definition") if row.own is None else lookup(documents, absent, row.own, files)
        own = _number(own)
        within, rule = judge(row, like, documents, absent, files)
        table.append({
            "id": row.id, "section": row.section, "quantity": row.quantity, "paper": float(row.paper),
            "like_for_like": like, "own": own,
            "difference": None if like is None else like - row.paper,
            "within_spread": within, "spread_rule": rule,
            "status": "computed" if like is not None else "not computed",
            "reason": reason or "", "own_reason": "" if own is not None else (own_reason or ""),
            "like_for_like_source": row.like_for_like.describe(files),
            "own_source": row.own.describe(files) if row.own is not None else "",
            "note": row.note,
        })
    return table


def headline(rows: Sequence[Row], table: Sequence[Mapping]) -> dict[str, dict[str, float | bool]]:
    """The rows marked ``headline``, flat enough for ``dvc metrics show`` (missing values left out)."""
    marked = {r.id for r in rows if r.headline}
    out = {}
    for t in table:
        if t["id"] in marked:
            out[t["id"]] = {k: t[k] for k in ("paper", "like_for_like", "own", "difference", "within_spread")
                            if t[k] is not None}
    return out


def report(rows: Sequence[Row], table: Sequence[Mapping], preset: str) -> dict:
    """The ``metrics/paper_comparison.json`` content."""
    return {
        "preset": preset,
        "headline": headline(rows, table),
        "counts": {"rows": len(table), "computed": sum(t["status"] == "computed" for t in table),
                   "within_spread": sum(t["within_spread"] is True for t in table),
                   "outside_spread": sum(t["within_spread"] is False for t in table)},
        "rows": [{k: _json_number(v) for k, v in t.items()} for t in table],
    }


def _json_number(value):
    if isinstance(value, float):
        return None if math.isnan(value) else round(value, 6)
    return value


# --- renderings ----------------------------------------------------------------------------------------

TABLE_SCHEMA = Schema("paper comparison", {
    "id": pa.string(),
    "section": pa.string(),  # of method.md
    "quantity": pa.string(),
    "paper": pa.float64(),
    "like_for_like": pa.float64(),  # NaN: not computed (see reason)
    "own": pa.float64(),  # NaN: the same definition as like-for-like, or not computed (see own_reason)
    "difference": pa.float64(),  # like-for-like minus paper
    "within_spread": pa.string(),  # yes, no, or empty (nothing to judge by: see spread_rule)
    "spread_rule": pa.string(),
    "status": pa.string(),  # computed, not computed
    "reason": pa.string(),
    "own_reason": pa.string(),
    "like_for_like_source": pa.string(),
    "own_source": pa.string(),
    "note": pa.string(),
})


def _flag(value: bool | None) -> str:
    return "" if value is None else ("yes" if value else "no")


def write_table_csv(path, table: Sequence[Mapping]) -> None:
    nan = float("nan")
    columns = {}
    for k, dtype in TABLE_SCHEMA.columns.items():
        if k == "within_spread":
            columns[k] = [_flag(t[k]) for t in table]
        elif pa.types.is_floating(dtype):
            columns[k] = [nan if t[k] is None else round(float(t[k]), 6) for t in table]
        else:
            columns[k] = [str(t[k]) for t in table]
    write_csv(path, TABLE_SCHEMA, columns)


def _cell(value) -> str:
    """A number as the paper writes its own: integers with thousands separators, else up to four decimals
    (three significant digits below 0.001)."""
    if value is None:
        return "-"
    if isinstance(value, float):
        if value.is_integer():
            return f"{value:,.0f}"
        if abs(value) < 1e-3:
            return f"{value:.3g}"
        return f"{value:,.4f}".rstrip("0").rstrip(".")
    return str(value)


def markdown(table: Sequence[Mapping]) -> str:
    """The table as Markdown: one line per row, the reason in place of a missing value."""
    lines = ["| section | quantity | paper | like-for-like | own | difference | within spread | spread rule |",
             "|---|---|---|---|---|---|---|---|"]
    for t in table:
        like = _cell(t["like_for_like"]) if t["status"] == "computed" else f"not computed: {t['reason']}"
        cells = [t["section"], t["quantity"], _cell(t["paper"]), like, _cell(t["own"]), _cell(t["difference"]),
                 _flag(t["within_spread"]) or "-", t["spread_rule"]]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")  # a bare | would split a cell
    return "\n".join(lines) + "\n"
