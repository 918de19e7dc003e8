"""Every published number of method.md beside ours, in one table (method.md §12).

Each :class:`Row` names a published number and where our two values of it are found:

- **like-for-like**: computed the way the paper computed it (its prompts, its thresholds and
  weights, its definitions: method.md §12);
- **own**: our own definition where it differs (held-out evaluation prompts, tuned values,
  full-context ablation, sign-aware ranks, centred SVD); empty where the definitions agree.

A value is a :class:`Source`: a named metrics document (a JSON file the workflow writes; the rule
maps names to files) and a key path into it. Every row gets a verdict from a closed set
(:data:`VERDICTS`) with the test that decided it written beside it (:class:`Test`):

- means against means (:func:`means_test`): the difference against its standard error (ours from
  the per-prompt std and n, the paper's from its reported std and n), two-sided at
  :data:`LEVEL`, with the 95% interval of the difference;
- a quantity measured once per seed (:func:`seeds_test`): the paper's value against our seeds'
  mean and standard error (a one-sample t-test over the seeds, two-sided at :data:`LEVEL`);
- exact quantities: equal or not; a range or bound the paper states: inside it or not;
- ``not comparable`` where the preset's model, data or prompt count differ from the paper's in a
  way that changes the quantity (:attr:`Row.needs`, :func:`differences`), with the reason;
- ``no spread`` where neither side gives an uncertainty to judge by.

Rows of ours only (:data:`OURS_ONLY`: no published number, ``paper`` None) list a number the paper does not
publish beside the published ones (the controls of method.md §6b): their test is ours, against our own
reference, and they are not counted among the verdicts (:func:`counts`).

A row whose document is not made by this workflow, or lacks the key, is listed as *not computed*
with the reason, never dropped: adding a source is adding its name to the rule's mapping, and its
rows are already here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from tinylens import published
from tinylens.model_config import FILE_NAMES
from tinylens.tables import Schema, write_csv
from tinylens.wording import get, num

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


#: The two-sided level of every test of the table.
LEVEL = 0.05
#: The verdicts, in the order the headline counts them.
VERDICTS = ("consistent", "differs", "not comparable", "no spread", "not computed")
#: The verdict column of a row with no published number: not a verdict against the paper, never counted.
OURS_ONLY = "ours only"
#: What of the paper's setup a quantity depends on (:attr:`Row.needs`; :func:`differences`).
ASPECTS = ("model", "data", "prompts")


@dataclass(frozen=True)
class Test:
    """How a row's like-for-like value is judged against the paper's.

    ``means``: a difference of means against its standard error (``source``: our
    ``{mean, std, n}``; ``value``: the paper's ``(std, n)``); ``seeds``: the paper's value against
    our seeds' mean and standard error (``source``: a path through :data:`ALL` giving one value
    per seed); ``paper_range``: inside the paper's range ``value = (lo, hi)``; ``lower_bound``:
    above the bound the paper states; ``exact``: equal to the paper's; ``none``: nothing to judge by.
    """

    __test__ = False  # not a test class for pytest

    kind: str = "none"
    value: float | tuple[float, float] | None = None
    source: Source | None = None


Spread = Test  # the name of earlier versions
NO_SPREAD = Test()


@dataclass(frozen=True)
class Row:
    id: str
    section: str
    quantity: str
    paper: float | None  # None: a row of ours only (OURS_ONLY)
    like_for_like: Source
    own: Source | None = None
    spread: Test = field(default=NO_SPREAD)
    headline: bool = False
    note: str = ""
    #: the aspects of the paper's setup (:data:`ASPECTS`) the quantity depends on: where the preset's
    #: differ, the row is ``not comparable``
    needs: frozenset[str] = frozenset()


# --- the rows of the published numbers (tinylens.published; method.md §1-3, §6, §7, §12) ----------------

#: What a row depends on (:attr:`Row.needs`): the trained model (width, heads, context, training steps), the
#: text (the strings searched), the prompt count (extremes grow with it; means and stds do not).
MODEL = frozenset({"model"})
DATA = frozenset({"data"})
#: §7 and §12: the supporting analyses' numbers (0-based blocks in tinylens.published; 1-based here).
ABLATION = {variant: tuple(by_block[b] for b in sorted(by_block)) for variant, by_block in published.ABLATION.items()}
CRITERION_END_OF_MODEL = tuple(published.CRITERION_END_OF_MODEL[b] for b in sorted(published.CRITERION_END_OF_MODEL))
CRITERION_SAME_STAGE = {b + 1: value for b, value in published.CRITERION_SAME_STAGE.items()}


def _loss_rows() -> list[Row]:
    rows = []
    for seed in published.SEEDS:
        rows.append(Row(
            f"published_step_seed{seed}", "§2", f"training step of the published model, seed {seed}",
            published.STEPS[seed], at("training", "models", seed, "steps"), spread=Test("exact"), needs=MODEL,
            note="the paper preset trains each seed to its published step; smaller presets train fewer"))
        for i, split in enumerate(("train", "val")):
            rows.append(Row(
                f"{split}_loss_seed{seed}", "§2", f"{split} loss, seed {seed}", published.LOSSES[seed][i],
                at("training", "models", seed, f"{split}_loss"),
                spread=Test("seeds", source=at("training", "models", ALL, f"{split}_loss")),
                headline=seed == "1337" and split == "val", needs=MODEL,
                note="the same estimate (random batches per split) in both definitions"))
    return rows


def _hellinger_rows() -> list[Row]:
    rows = []
    for stat, value in published.HELLINGER.items():
        rows.append(Row(
            f"hellinger_{stat}", "§6", f"approximation vs model, {stat} of H over the prompts", value,
            at("paper_prompts", "paper_values", stat), at("heldout", "approximation", stat),
            spread=Test("means", (published.HELLINGER["std"], published.HELLINGER_PROMPTS), at("paper_prompts", "paper_values"))
            if stat == "mean" else NO_SPREAD, headline=stat in ("mean", "std"),
            needs=MODEL | DATA | {"prompts"} if stat in ("min", "max") else MODEL | DATA,
            note="like-for-like: the paper's prompts, thresholds and weights, in-sample; own: held-out evaluation "
                 "prompts, thresholds and weights tuned on the held-out tuning prompts"))
    rows.append(Row(
        "hellinger_mean_tuned_values", "§6", "approximation vs model, mean H, our tuned values on the paper's prompts",
        published.HELLINGER["mean"], at("paper_prompts", "approximation", "mean"), at("corpus", "approximation", "mean"),
        spread=Test("means", (published.HELLINGER["std"], published.HELLINGER_PROMPTS), at("paper_prompts", "approximation")),
        headline=True, needs=MODEL | DATA,
        note="for reference: the paper's prompts with the values tuned on the corpus mode's tuning prompts; own: the "
             "corpus mode's evaluation prompts"))
    for seed, (mean, std) in published.ALTERNATES.items():
        rows.append(Row(
            f"alternate_{seed}_mean", "§6", f"seed {seed} vs the original, mean H", mean,
            at("paper_prompts", "alternates", seed, "mean"), at("heldout", "alternates", seed, "mean"),
            spread=Test("means", (std, published.HELLINGER_PROMPTS), at("paper_prompts", "alternates", seed)), headline=True,
            needs=MODEL | DATA,
            note="like-for-like: the paper's prompts; own: the held-out evaluation prompts"))
        rows.append(Row(
            f"alternate_{seed}_std", "§6", f"seed {seed} vs the original, std of H", std,
            at("paper_prompts", "alternates", seed, "std"), at("heldout", "alternates", seed, "std"), needs=MODEL | DATA))
    return rows


def _case_study_rows() -> list[Row]:
    rows = []
    and_only_l = Where("prompt", "And only l")
    for t, (matches, h) in published.AND_ONLY_L_BLOCK1.items():
        for what, value in (("matches", matches), ("hellinger", h)):
            rows.append(Row(
                f"and_only_l_block1_{t}_{what}", "§6", f"'And only l', block 1 alone at {t}: "
                + ("strings above the threshold" if what == "matches" else "H"), value,
                at("case_studies", "case_studies", and_only_l, "block0_only", t, what),
                needs=MODEL, note="the paper's model and ours differ in detail (method.md §6)"))
    for b, matches in enumerate(published.AND_ONLY_L_ALL_BLOCKS["matches"]):
        rows.append(Row(
            f"and_only_l_block{b + 1}_matches", "§6", f"'And only l', all blocks: strings above block {b + 1}'s "
            "threshold", matches, at("case_studies", "case_studies", and_only_l, "paper_values", "matches", b),
            at("case_studies", "case_studies", and_only_l, "tuned", "matches", b),
            needs=MODEL, note="like-for-like: the paper's thresholds; own: our tuned thresholds"))
    rows.append(Row(
        "and_only_l_all_blocks_hellinger", "§6", "'And only l', all blocks: H", published.AND_ONLY_L_ALL_BLOCKS["hellinger"],
        at("case_studies", "case_studies", and_only_l, "paper_values", "hellinger"),
        at("case_studies", "case_studies", and_only_l, "tuned", "hellinger"),
        needs=MODEL, note="like-for-like: the paper's thresholds and weights; own: our tuned ones"))
    hing_tremb = Where("prompt", "hing tremb")
    rows.append(Row(
        "hing_tremb_block1_hellinger", "§6", "'hing tremb', block 1 alone: H", published.HING_TREMB["block1_only"],
        at("case_studies", "case_studies", hing_tremb, "block0_only", "0.95", "hellinger"),
        needs=MODEL, note="at 0.95, the paper's block-1 threshold (the paper does not restate it for this prompt)"))
    rows.append(Row(
        "hing_tremb_all_blocks_hellinger", "§6", "'hing tremb', all blocks: H", published.HING_TREMB["all_blocks"],
        at("case_studies", "case_studies", hing_tremb, "paper_values", "hellinger"),
        at("case_studies", "case_studies", hing_tremb, "tuned", "hellinger"),
        needs=MODEL, note="like-for-like: the paper's thresholds and weights; own: our tuned ones"))
    return rows


def _supporting_rows(mode: str = SUPPORTING_MODE) -> list[Row]:
    """§7 and §12 from the supporting analyses' metrics (``metrics/supporting.json``)."""
    rows = []
    for variant, values in ABLATION.items():
        for b, value in enumerate(values, start=1):
            block = ("ablation", "comparison", mode, Where("block", b - 1))  # 0-based in the metrics
            rows.append(Row(
                f"ablation_{variant}_block{b}", "§7", f"ablation, {variant.replace('_', '-')} in block {b}: mean H",
                value, at("supporting", *block, f"one_token_{variant}"), at("supporting", *block, f"full_{variant}"),
                spread=Test("seeds", source=at("supporting", "ablation", "modes", mode, "one_token", variant,
                                               "per_seed", ALL, "mean", b - 1)),
                headline=b == 1, needs=MODEL,
                note="like-for-like: the one-token continuation (the paper's code); own: the full-context intervention"))
    for b, value in enumerate(CRITERION_END_OF_MODEL, start=1):
        block = ("criterion", "comparison", mode, Where("block", b - 1))
        rows.append(Row(
            f"criterion_end_of_model_block{b}", "§7", f"criterion, end-of-model subspaces, block {b}: % of prompts",
            value, at("supporting", *block, "end_of_model_abs"), at("supporting", *block, "end_of_model_signed"),
            headline=b == 6, needs=MODEL, note="like-for-like: ranks by |cos| (the notebooks); own: sign-aware ranks"))
    for b, value in CRITERION_SAME_STAGE.items():
        block = ("criterion", "comparison", mode, Where("block", b - 1))
        rows.append(Row(
            f"criterion_same_stage_block{b}", "§7", f"criterion, same-stage subspaces, block {b}: % of prompts",
            value, at("supporting", *block, "same_stage_abs"), at("supporting", *block, "same_stage_signed"),
            needs=MODEL, note="like-for-like: ranks by |cos|; own: sign-aware ranks"))
    block6 = ("criterion", "comparison", mode, Where("block", 5))
    rows.append(Row(
        "criterion_chance_block6", "§7", "criterion's chance level, block 6, end-of-model: % of prompts",
        sum(published.CRITERION_CHANCE_PERCENT) / 2, at("supporting", *block6, "end_of_model_permutation_null_abs"),
        at("supporting", *block6, "end_of_model_chance_exact"), spread=Test("paper_range", published.CRITERION_CHANCE_PERCENT),
        needs=MODEL,
        note="the paper drew iid cosines from a kernel density fit (16-21%); like-for-like here: the permutation "
             "null, which keeps the real cosines exactly; own: the exact formula C(k, n) / C(V, n)"))
    rows.append(Row(
        "subspace_sigma_ratio_a", "§7", "token subspace of 'a' at the input of ln_f: sigma_1 / sigma_2",
        published.SUBSPACE_SIGMA_RATIO["sigma_ratio_more_than"], at("supporting", "token_subspaces", "a_at_ln_f_input", "sigma_ratio"),
        at("supporting", "token_subspaces", "a_at_ln_f_input", "sigma_ratio_centred"),
        spread=Test("lower_bound", published.SUBSPACE_SIGMA_RATIO["sigma_ratio_more_than"]), needs=MODEL,
        note="the paper states sigma_1 > 6 sigma_2; like-for-like: uncentred SVD (the notebooks); own: centred"))
    for key in ("mean_output_norm", "mean_output_norm_scaled"):
        value = published.FINAL_LAYERNORM[key]
        rows.append(Row(
            f"final_layernorm_{key}", "§12", "final LayerNorm, last block's output "
            + ("scaled by 10" if key.endswith("scaled") else "unscaled") + ": mean ln_f output norm", value,
            at("supporting", "final_layernorm", "modes", mode, "scaling", "10", key), needs=MODEL,
            note="the paper: its first 1,000 prompts; ours: every prompt of the mode; the norm depends on the "
                 "model's ln_f gain, so only the scaled-vs-unscaled agreement carries over"))
    return rows


#: The controls of method.md §6b (metrics/controls.json): key -> the quantity's words.
CONTROL_SOURCES = {
    "ffwd_out": "the approximation (ffwd_out)",
    "suffix": "suffix counts, no network",
    "null": "ffwd_out search, next-token counts permuted among the strings (null)",
    "ffwd_out_sample": "ffwd_out over the sample of strings",
    "sa_out": "sa_out over the sample",
    "block_input": "block input over the sample",
    "block_output": "block output over the sample",
    "ffwd_and_sa_out": "ffwd_out + sa_out (twelve terms) over the sample",
}


def _control_rows() -> list[Row]:
    """Ours only: each source's mean Hellinger distance from the model (like-for-like: the paper's prompts,
    tuned on the corpus mode's tuning prompts; own: the held-out prompts) with its paired test against the
    ffwd_out approximation on the held-out prompts; each block's criterion at its own best threshold."""
    rows = []
    for key, words in CONTROL_SOURCES.items():
        paired = key != "ffwd_out"
        rows.append(Row(
            f"control_{key}", "§6b", f"control: {words}: mean H", None,
            at("controls", "modes", "paper", "sources", key, "mean"),
            at("controls", "modes", "heldout", "sources", key, "mean"),
            spread=Test("ours", source=at("controls", "modes", "heldout", "sources", key)) if paired else NO_SPREAD,
            note="ours only (no published number): like-for-like the paper's prompts, own the held-out prompts; "
                 "the test: paired against ffwd_out (on the same sample of strings for the vectors), held out"))
    for b in range(len(CRITERION_END_OF_MODEL)):
        block = ("criterion", "comparison", SUPPORTING_MODE, Where("block", b))
        rows.append(Row(
            f"control_criterion_block_alone_block{b + 1}", "§6b", f"criterion, end-of-model subspaces, block {b + 1} at its "
            "own best threshold: % of prompts", None, at("supporting", *block, "end_of_model_abs_block_alone"),
            note="ours only: the threshold where block b alone approximates the model best on the tuning prompts, "
                 "not the jointly tuned one (the §7 rows); the paper's prompts"))
    return rows


ROWS: tuple[Row, ...] = (
    Row("n_params", "§1", "parameters of the model", 10_788_929, at("original_model", "n_params"),
        spread=Test("exact"), needs=MODEL, note="exact at the paper preset's shape; smaller presets have smaller models"),
    Row("n_strings", "§3", "unique substrings of length 10", 858_923, at("verification", "paper", "strings"),
        spread=Test("exact"), needs=DATA,
        note="the strings the paper mode searched; the test preset uses a slice of the text"),
    *_loss_rows(),
    *_hellinger_rows(),
    *_case_study_rows(),
    *_supporting_rows(),
    *_control_rows(),
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


@dataclass(frozen=True)
class Verdict:
    """A row's verdict (one of :data:`VERDICTS`), the test that decided it, and its numbers (None where the
    test has none): the test statistic, its two-sided p-value, the 95% interval of the difference."""

    verdict: str
    test: str
    statistic: float | None = None
    p_value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None


def _decide(p_value: float) -> str:
    return "differs" if p_value < LEVEL else "consistent"


def means_test(ours_mean: float, ours_std: float, ours_n: int, paper_mean: float, paper_std: float,
               paper_n: int) -> Verdict:
    """Two means against each other: z = (ours - paper) / se, se = sqrt(std_o^2/n_o + std_p^2/n_p) (each mean's
    standard error from its per-prompt std and prompt count; both counts in the hundreds or more, so the normal
    distribution), two-sided at :data:`LEVEL`, with the 95% interval of the difference."""
    if ours_n < 2 or paper_n < 2:
        return Verdict("no spread", f"difference of means: needs two prompts or more a side (ours {ours_n})")
    se = math.sqrt(ours_std**2 / ours_n + paper_std**2 / paper_n)
    diff = ours_mean - paper_mean
    if se == 0:
        return Verdict("no spread", "difference of means: both standard errors are 0")
    from scipy import stats  # here, not at the top: the Snakefile imports this module while it plans

    z = diff / se
    p = float(2 * stats.norm.sf(abs(z)))
    half = float(stats.norm.ppf(0.975)) * se
    return Verdict(_decide(p), f"z-test of the difference of means: se {se:.2g} (ours n={ours_n}, the paper's "
                   f"std {paper_std:g}, n={paper_n}), z = {z:.2f}, p = {p:.2g}, 95% CI of the difference "
                   f"[{diff - half:.4g}, {diff + half:.4g}], two-sided at {LEVEL:g}", z, p, diff - half, diff + half)


def seeds_test(values: Sequence[float], paper: float) -> Verdict:
    """The paper's value against our seeds' mean: :func:`tinylens.measures.mean_test` of the seeds' values against
    it (t = (mean - paper) / (s / sqrt(k)), k - 1 degrees of freedom), two-sided at :data:`LEVEL`, with the 95%
    interval of the difference."""
    from tinylens.measures import mean_test

    k = len(values)
    if k < 2:
        return Verdict("no spread", f"t-test over seeds: needs two seeds or more, has {k}")
    test = mean_test([float(x) for x in values], null=paper)
    mean, se = test["mean"], test["se"]
    diff = mean - paper
    if se == 0:
        return Verdict("consistent" if diff == 0 else "differs",
                       f"t-test over {k} seeds: every seed gives {mean:.4g}, no spread; equal to the paper's or not")
    low, high = (bound - paper for bound in test["ci95"])
    return Verdict(_decide(test["p"]), f"one-sample t-test over {k} seeds: our mean {mean:.4g}, se {se:.2g}, "
                   f"t = {test['t']:.2f} ({k - 1} df), p = {test['p']:.2g}, 95% CI of the difference [{low:.4g}, "
                   f"{high:.4g}], two-sided at {LEVEL:g}", test["t"], test["p"], low, high)


#: The training settings that change the trained model (threads, precision of the arithmetic and the like do
#: not change what a row measures).
TRAINING = ("batch_size", "phases", "final_step_by_seed")


def differences(preset: Mapping, paper: Mapping) -> dict[str, str]:
    """Which aspects (:data:`ASPECTS`) of the active preset's settings differ from the ``paper`` preset's, and
    how: ``model`` (the model's shape, or its training: batch size, phases, per-seed last steps), ``data``
    (the slice of the corpus), ``prompts`` (the paper mode's prompt count). ``preset``, ``paper``: the
    presets' settings (``model``, ``train``, ``corpus_chars``, ``analysis``)."""
    out = {}
    # the model's fields named as its config.json names them (the table's wording since the first runs)
    model = [f"{FILE_NAMES.get(k, k)} {preset['model'].get(k)} (the paper: {v})" for k, v in paper["model"].items()
             if preset["model"].get(k) != v]
    train = [f"{k} {preset['train'].get(k)} (the paper: {paper['train'].get(k)})" for k in TRAINING
             if preset["train"].get(k) != paper["train"].get(k)]
    if model or train:
        out["model"] = "a different model: " + "; ".join(model + train)
    if preset.get("corpus_chars") != paper.get("corpus_chars"):
        out["data"] = f"corpus_chars {preset.get('corpus_chars')} (the paper: all of the text)"
    ours_n, paper_n = preset["analysis"]["paper_prompts"], paper["analysis"]["paper_prompts"]
    if ours_n < paper_n:
        out["prompts"] = f"{ours_n} of the paper's {paper_n} prompts"
    return out


def judge(row: Row, like_for_like: float | None, documents: Mapping[str, object], absent: Mapping[str, str],
          files: Mapping[str, str] | None = None, differ: Mapping[str, str] | None = None) -> Verdict:
    """The row's :class:`Verdict`. ``differ``: :func:`differences` (nothing differs where None)."""
    test = row.spread
    if row.paper is None:
        return _ours_only(row, documents, absent, files)
    if like_for_like is None:
        return Verdict("not computed", "no like-for-like value")
    reasons = [differ[a] for a in ASPECTS if a in row.needs and a in (differ or {})]
    if reasons:
        return Verdict("not comparable", "not comparable: " + "; ".join(reasons))
    if test.kind == "none":
        return Verdict("no spread", "no spread reported or computable")
    if test.kind == "means":
        stats_, reason = lookup(documents, absent, test.source, files)
        numbers = {k: _number(stats_.get(k)) for k in ("mean", "std", "n")} if isinstance(stats_, Mapping) else {}
        if reason is not None or None in numbers.values() or not numbers:
            why = reason or f"{test.source.describe(files or {})} has no mean, std and n"
            return Verdict("no spread", f"difference of means: {why}")
        paper_std, paper_n = test.value
        return means_test(numbers["mean"], numbers["std"], int(numbers["n"]), row.paper, paper_std, paper_n)
    if test.kind == "seeds":
        values, reason = lookup(documents, absent, test.source, files)
        numbers = [_number(v) for v in values] if isinstance(values, list) else []
        if reason is not None or not numbers or None in numbers:
            return Verdict("no spread", f"t-test over seeds: {reason or f'{values!r} is not a list of seed values'}")
        return seeds_test(numbers, row.paper)
    if test.kind == "paper_range":
        lo, hi = test.value
        return Verdict("consistent" if lo <= like_for_like <= hi else "differs",
                       f"inside the paper's stated range [{lo:g}, {hi:g}] or not")
    if test.kind == "lower_bound":
        return Verdict("consistent" if like_for_like > test.value else "differs",
                       f"above the paper's stated bound {test.value:g} or not")
    if test.kind == "exact":
        return Verdict("consistent" if like_for_like == row.paper else "differs", "exact: equal to the paper's or not")
    raise ValueError(f"row {row.id}: unknown test kind {test.kind!r}")


def _ours_only(row: Row, documents: Mapping[str, object], absent: Mapping[str, str],
               files: Mapping[str, str] | None) -> Verdict:
    """A row of ours only: no verdict against the paper; its own paired test, where it has one, beside it."""
    if row.spread.kind != "ours":
        return Verdict(OURS_ONLY, "ours only (no published number)")
    entry, reason = lookup(documents, absent, row.spread.source, files)
    c = entry.get("versus_ffwd_out") if isinstance(entry, Mapping) else None
    if reason is not None or not isinstance(c, Mapping):
        return Verdict(OURS_ONLY, f"ours only (no published number); no paired test: {reason or 'none recorded'}")
    return Verdict(OURS_ONLY, f"ours only (no published number); paired t-test against {entry.get('reference')}, "
                   f"held-out prompts (n={c['n']}): difference {c['mean_difference']:.3g}, 95% CI [{c['ci_low']:.3g}, "
                   f"{c['ci_high']:.3g}], p = {c['p']:.2g}: {entry.get('verdict')}", c.get("t"), c["p"], c["ci_low"],
                   c["ci_high"])


def compare(rows: Sequence[Row], documents: Mapping[str, object], absent: Mapping[str, str] | None = None,
            files: Mapping[str, str] | None = None, differ: Mapping[str, str] | None = None) -> list[dict]:
    """The table: one record per row (keys of :data:`TABLE_SCHEMA`, values None where missing).

    documents: name -> parsed metrics document; absent: name -> why this workflow has no such document;
    files: name -> its path, for the table's source column; differ: :func:`differences` of the run's preset.
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
        v = judge(row, like, documents, absent, files, differ)
        table.append({
            "id": row.id, "section": row.section, "quantity": row.quantity,
            "paper": None if row.paper is None else float(row.paper), "like_for_like": like, "own": own,
            "difference": None if like is None or row.paper is None else like - row.paper,
            "verdict": v.verdict, "test": v.test, "statistic": v.statistic, "p_value": v.p_value,
            "ci_low": v.ci_low, "ci_high": v.ci_high,
            "status": "computed" if like is not None else "not computed",
            "reason": reason or "", "own_reason": "" if own is not None else (own_reason or ""),
            "like_for_like_source": row.like_for_like.describe(files),
            "own_source": row.own.describe(files) if row.own is not None else "",
            "note": row.note,
        })
    return table


def counts(table: Sequence[Mapping]) -> dict[str, int]:
    """Rows per verdict (every verdict of :data:`VERDICTS`, zeros included) and in all: the published numbers;
    the rows of ours only (:data:`OURS_ONLY`) are counted apart, never among the verdicts."""
    published_rows = [t for t in table if t["verdict"] != OURS_ONLY]
    return {"rows": len(published_rows), **{v: sum(t["verdict"] == v for t in published_rows) for v in VERDICTS},
            "ours_only": len(table) - len(published_rows)}


def headline(rows: Sequence[Row], table: Sequence[Mapping]) -> dict[str, dict[str, float | str]]:
    """The rows marked ``headline``, flat (missing values left out)."""
    marked = {r.id for r in rows if r.headline}
    out = {}
    for t in table:
        if t["id"] in marked:
            out[t["id"]] = {k: t[k] for k in ("paper", "like_for_like", "own", "difference", "verdict", "p_value")
                            if t[k] is not None}
    return out


def report(rows: Sequence[Row], table: Sequence[Mapping], preset: str, differ: Mapping[str, str] | None = None) -> dict:
    """The ``metrics/paper_comparison.json`` content: the verdict counts first (its headline)."""
    return {
        "preset": preset,
        "counts": counts(table),
        "level": LEVEL,
        "differences_from_the_paper": dict(differ or {}),
        "headline": headline(rows, table),
        "rows": [{k: _json_number(v) for k, v in t.items()} for t in table],
    }


#: Each run's headline (rule write_headline), one file per preset in one folder, outside results/<preset>/:
#: dvc.yaml's top-level ``metrics:`` names the folder, so `dvc metrics show` reads the presets that have run.
HEADLINE = "results/headline/{preset}.json"


def run_headline(core: Mapping, comparison: Mapping) -> dict:
    """The handful of numbers `dvc metrics show` prints for a run: short keys and four decimals, so that the
    table of every preset run fits a terminal (docs/dvc.md says what each is). ``core``: metrics/headline.json
    (:func:`tinylens.core.summary.headline`); ``comparison``: :func:`report`'s metrics/paper_comparison.json.

    ``H``: mean Hellinger distances from the original model: ``paper`` (the paper's prompts, thresholds and
    weights: like for like with ``published``, the paper's own), ``heldout`` (held-out prompts, thresholds and
    weights tuned on other held-out prompts) and ``seeds`` (the alternate seeds' models on the same held-out
    prompts: the noise floor of ``heldout``); ``val_loss``: the original model's validation loss;
    ``consistent`` and ``differs``: the comparison's verdict counts."""
    distances = {"heldout": core.get("heldout_approximation_mean"), "paper": core.get("paper_paper_values_mean"),
                 "published": published.HELLINGER["mean"], "seeds": core.get("heldout_alternates_mean")}
    return {"H": {name: round(value, 4) for name, value in distances.items() if value is not None},
            "val_loss": round(core["val_loss_original"], 4),
            "consistent": comparison["counts"]["consistent"], "differs": comparison["counts"]["differs"]}


def _json_number(value):
    if isinstance(value, float):
        return None if math.isnan(value) else float(f"{value:.6g}") if abs(value) < 1e-3 else round(value, 6)
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
    "verdict": pa.string(),  # one of VERDICTS
    "test": pa.string(),  # the test that decided the verdict, with its numbers (or why none)
    "statistic": pa.float64(),  # z or t; NaN where the test has none
    "p_value": pa.float64(),  # two-sided; NaN where the test has none
    "ci_low": pa.float64(),  # the 95% interval of the difference; NaN where the test has none
    "ci_high": pa.float64(),
    "status": pa.string(),  # computed, not computed
    "reason": pa.string(),
    "own_reason": pa.string(),
    "like_for_like_source": pa.string(),
    "own_source": pa.string(),
    "note": pa.string(),
})


def write_table_csv(path, table: Sequence[Mapping]) -> None:
    nan = float("nan")
    columns = {}
    for k, dtype in TABLE_SCHEMA.columns.items():
        if pa.types.is_floating(dtype):
            columns[k] = [nan if t[k] is None else float(_json_number(float(t[k]))) for t in table]
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
    """The table as Markdown: the verdict counts, then one line per row, the reason in place of a missing value."""
    c = counts(table)
    header = ["| section | quantity | paper | like-for-like | own | difference | verdict | test |",
              "|---|---|---|---|---|---|---|---|"]
    lines = [", ".join(f"{v}: {c[v]}" for v in VERDICTS) + f" (of {c['rows']} rows)", "", *header]
    ours = [t for t in table if t["verdict"] == OURS_ONLY]
    for t in [t for t in table if t["verdict"] != OURS_ONLY] + ([None] if ours else []) + ours:
        if t is None:  # the rows of ours only, apart
            lines += ["", f"Ours only ({len(ours)} rows, no published number; not counted among the verdicts):", "",
                      *header]
            continue
        like = _cell(t["like_for_like"]) if t["status"] == "computed" else f"not computed: {t['reason']}"
        cells = [t["section"], t["quantity"], _cell(t["paper"]), like, _cell(t["own"]), _cell(t["difference"]),
                 t["verdict"], t["test"]]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")  # a bare | would split a cell
    return "\n".join(lines) + "\n"


def findings(documents: Mapping[str, object]) -> list[str]:
    """The comparison's sentences of the run's findings (tinylens.findings): the verdict counts, what is not
    comparable and why, and the rows that differ. ``documents``: ``comparison`` (metrics/paper_comparison.json)."""
    doc = documents["comparison"]
    c = get(doc, "counts")
    phrases = {"consistent": "agree with ours", "differs": "differ", "not comparable": "are not comparable at this "
               "preset", "no spread": "have no uncertainty to judge by", "not computed": "were not computed"}
    parts = [f"{c[v]} {phrases[v]}" for v in VERDICTS if c.get(v)]
    ours = c.get("ours_only", 0)  # tables of earlier runs have none
    out = [f"Of the {get(c, 'rows')} published numbers, " + ", ".join(parts)
           + f" (two-sided tests at {num(get(doc, 'level'))}; `comparison/paper_comparison.md`"
           + (f", which also lists {ours} numbers of ours only, the controls of method.md §6b, not counted among them"
              if ours else "") + ")."]
    differ = get(doc, "differences_from_the_paper")
    if differ:
        out.append("Not comparable here: " + "; ".join(f"{k}: {v}" for k, v in differ.items()) + ".")
    rows = {r["id"]: r for r in get(doc, "rows")}
    mean = rows.get("hellinger_mean")
    if mean and mean["verdict"] in ("consistent", "differs"):
        word = "differs from" if mean["verdict"] == "differs" else "is no different from"
        out.append(f"The like-for-like mean Hellinger distance, {num(mean['like_for_like'])}, {word} the paper's "
                   f"{num(mean['paper'])} (difference {num(mean['difference'], 2)}, 95% interval "
                   f"{num(mean['ci_low'], 2)} to {num(mean['ci_high'], 2)}, p = {num(mean['p_value'], 2)}).")
    elif mean and mean["verdict"] == "not comparable" and mean.get("like_for_like") is not None:
        # the same prompts, thresholds and weights as the paper's, on a different model: a description, no test
        out.append(f"On the paper's own prompts with its thresholds and weights, this run's model is approximated to a "
                   f"mean Hellinger distance of {num(mean['like_for_like'])}, the paper's model to {num(mean['paper'])}: "
                   "two different models on the same prompts, so no verdict on the paper's number.")
    differing = [r for r in rows.values() if r["verdict"] == "differs" and r["id"] != "hellinger_mean"]
    if differing:
        out.append("Differing: " + "; ".join(f"{r['quantity']} ({num(r['like_for_like'])} against "
                                             f"{num(r['paper'])})" for r in differing[:4])
                   + (f"; and {len(differing) - 4} more" if len(differing) > 4 else "") + ".")
    return out
