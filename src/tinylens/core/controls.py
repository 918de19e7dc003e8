"""Controls of the core claim (method.md §6b): is it the feed-forward outputs that make the approximation work?

The approximation (method.md §5) sums the next-token counts of the training strings whose ``ffwd_out`` is alike
to the prompt's. A distance of about 0.17 from the model shows that counts selected that way approximate the
model; this module asks whether the *feed-forward outputs* are what makes it work, with other sources of
next-token counts approximated, tuned and evaluated the same way (coordinate descent on the tuning prompts,
:func:`tinylens.core.approx.tune_and_evaluate`, on the disjoint evaluation prompts; the paper's prompts with
the values tuned on the corpus mode's tuning prompts), each paired with the ``ffwd_out`` approximation on the
same prompts:

- ``suffix``: no network: the counts of the text's strings ending in the prompt's last k characters
  (:mod:`tinylens.core.suffix`), over the whole searched text;
- ``null``: the ``ffwd_out`` search with the strings' next-token counts permuted among the strings (the
  search's second count matrix, :func:`tinylens.core.search.search_prompts_with_null`): a control that must fail;
- the vector controls (:data:`VECTORS`): the same search with another vector of each block (``sa_out``, the
  block's input, its output) or with ``ffwd_out`` and ``sa_out`` together, over a seeded sample of the strings
  (run through the model in the job), paired with ``ffwd_out`` recomputed on the same sample;
- another seed of the model, the reference line the evaluation already draws.

The verdict of each source is that of one paired t-test (:func:`tinylens.measures.paired_difference`) of the
per-prompt Hellinger distances, source minus ``ffwd_out``: ``ffwd_out better`` when the 95% interval of the
mean difference lies above 0, ``ffwd_out worse`` when below, else ``no different`` (:func:`verdict`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from tinylens.core.approx import select_thresholds, split_masks, tune_and_evaluate
from tinylens.measures import describe, hellinger, paired_difference, standard_error

#: The prompt modes the controls report: held-out, and the paper's own prompts (tuned with the corpus mode).
EVALUATED = ("heldout", "paper")

#: The vector controls: source -> the activation kinds whose per-block searches make its terms, in order. The
#: block output is x_{b+1} (the next block's input; the last block's is the input of ln_f). ffwd_out and
#: sa_out together are twelve terms, each block's ffwd_out and its sa_out searched separately, each with a
#: threshold and a weight of its own, all tuned together: a sum that nests the ffwd_out approximation (the
#: sa_out weights at 0), so what it gains over it is sa_out's.
VECTORS: dict[str, tuple[str, ...]] = {
    "ffwd_out": ("ffwd_out",),
    "sa_out": ("sa_out",),
    "block_input": ("block_input",),
    "block_output": ("block_output",),
    "ffwd_and_sa_out": ("ffwd_out", "sa_out"),
}

#: Every source's words, in the order the figure and the findings list them.
LABELS = {
    "suffix": "suffix counts (no network)",
    "ffwd_out": "ffwd_out (the approximation)",
    "null": "ffwd_out, counts permuted (null)",
    "ffwd_out_sample": "ffwd_out on the sample",
    "sa_out": "sa_out",
    "block_input": "block input",
    "block_output": "block output",
    "ffwd_and_sa_out": "ffwd_out + sa_out",
}

#: The verdicts, from the 95% interval of (source - ffwd_out).
VERDICTS = ("ffwd_out better", "no different", "ffwd_out worse")


def verdict(test: Mapping) -> str:
    """A source against ``ffwd_out`` from :func:`~tinylens.measures.paired_difference` of (source - ffwd_out):
    ``ffwd_out better`` when the interval lies above 0 (the source is further from the model), ``ffwd_out
    worse`` when below, else ``no different``."""
    return ("ffwd_out better" if test["ci_low"] > 0 else "ffwd_out worse" if test["ci_high"] < 0
            else "no different")


# --- the prompts each evaluated mode is tuned and evaluated on ------------------------------------------------


def tuning_rows(mode: str, tuned_with: Mapping[str, str], load: Callable[[str], tuple[Mapping, Mapping]]
                ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """The rows a source of ``mode`` is tuned and evaluated on: the tuning prompts of ``tuned_with[mode]`` then
    the evaluation prompts of ``mode`` (for the held-out mode both of its own table; for the paper mode the
    corpus mode's tuning prompts, then the paper's).

    ``load(mode)`` gives ``(prompts, arrays)``: the prompt table (``prompt_id``, ``split``) and arrays whose
    first axis follows its rows. Returns ``(arrays, splits, eval_prompt_ids)``, the arrays restricted to those
    rows, stacked in that order."""
    tuner = tuned_with[mode]
    t_prompts, t_arrays = load(tuner)
    t_tune = split_masks(t_prompts["split"])["tune"]
    m_prompts, m_arrays = (t_prompts, t_arrays) if tuner == mode else load(mode)
    m_eval = split_masks(m_prompts["split"])["eval"]
    if not t_tune.any() or not m_eval.any():
        raise ValueError(f"the {mode} mode needs tuning prompts (of the {tuner} mode) and evaluation prompts")
    arrays = {k: np.concatenate([np.asarray(t_arrays[k])[t_tune], np.asarray(m_arrays[k])[m_eval]])
              for k in t_arrays}
    splits = np.array(["tune"] * int(t_tune.sum()) + ["eval"] * int(m_eval.sum()))
    return arrays, splits, np.asarray(m_prompts["prompt_id"])[m_eval]


def evaluate_sources(modes: Sequence[str], tuned_with: Mapping[str, str], load, fit) -> tuple[dict, dict]:
    """For each mode: :func:`tuning_rows`, then ``fit(mode, arrays, splits) -> {source: (tuned, hellinger)}`` (each
    source tuned on the tuning rows, its Hellinger distances those of the evaluation rows). Returns the tuned
    values (mode -> source -> tuned, with ``tuned_with``) and the per-prompt columns of
    :func:`tinylens.core.schemas.controls_schema`."""
    tuned: dict[str, dict] = {}
    columns: dict[str, list] = {"mode": [], "prompt_id": []}
    for mode in modes:
        arrays, splits, ids = tuning_rows(mode, tuned_with, load)
        results = fit(mode, arrays, splits)
        tuned[mode] = {"tuned_with": tuned_with[mode], "tuning_prompts": int((splits == "tune").sum()),
                       **{s: t for s, (t, _) in results.items()}}
        columns["mode"] += [mode] * len(ids)
        columns["prompt_id"] += [int(i) for i in ids]
        for source, (_, h) in results.items():
            columns.setdefault(f"hellinger_{source}", []).extend(np.asarray(h, dtype=np.float64).tolist())
    return tuned, columns


# --- the vector controls --------------------------------------------------------------------------------------


def block_vectors(acts: Mapping[str, np.ndarray], kind: str) -> np.ndarray:
    """``[rows blocks d_model]`` vectors of ``kind`` from the activations ``{block_input, sa_out, ffwd_out}``, each
    ``[rows blocks d_model]``: a recorded kind as it is, ``block_output`` as x_{b+1}: the next block's input, and
    for the last block (x + sa_out) + ffwd_out in float32, the order the model adds them in."""
    if kind != "block_output":
        return np.asarray(acts[kind])
    x = np.asarray(acts["block_input"])
    last = (x[:, -1] + np.asarray(acts["sa_out"])[:, -1]) + np.asarray(acts["ffwd_out"])[:, -1]
    return np.concatenate([x[:, 1:], last[:, None]], axis=1)


def vector_fit(string_acts: Mapping[str, np.ndarray], table, edges: np.ndarray, init: np.ndarray,
               rounds: int, sources: Sequence[str] = tuple(VECTORS), log=None, **search):
    """The ``fit`` of :func:`evaluate_sources` for the vector controls: ``arrays`` holds ``q`` ``[rows vocab]`` and
    one ``[rows blocks d_model]`` array per recorded kind. Each kind's blocks are searched once over the sampled
    strings (``string_acts``: kind -> ``[strings blocks d_model]``; ``table``: their
    :class:`~tinylens.core.strings.StringTable`, whose counts and members of the mode go with them), with the
    exact search of method.md §5 (``search``: its options, e.g. ``threads``, ``device``); each source stacks the
    kinds' blocks it uses and is tuned from ``init`` (repeated per kind) by
    :func:`~tinylens.core.approx.tune_and_evaluate`."""
    from tinylens.core.search import CountsCSR, cumulative, search_prompts

    def fit(mode: str, arrays: Mapping[str, np.ndarray], splits: np.ndarray) -> dict:
        members = table.members(mode)
        counts = CountsCSR.from_dense(table.counts(mode), members)
        above: dict[str, np.ndarray] = {}

        def searched(prompts: np.ndarray, strings: np.ndarray) -> np.ndarray:  # [rows blocks edges vocab], cumulative
            _, summed = search_prompts(list(prompts.transpose(1, 0, 2)), lambda b: strings[:, b], counts, edges,
                                       members, progress=False, **search)
            return cumulative(summed, axis=2, out=summed)

        def kind_above(kind: str) -> np.ndarray:
            if kind not in above:
                prompts, strings = block_vectors(arrays, kind), block_vectors(string_acts, kind)
                if kind == "block_output" and "block_input" in above:  # x_{b+1}: block b+1's input, searched already
                    last = searched(prompts[:, -1:], strings[:, -1:])
                    above[kind] = np.concatenate([above["block_input"][:, 1:], last], axis=1)
                else:
                    above[kind] = searched(prompts, strings)
            return above[kind]

        out = {}
        for i, source in enumerate(sources):
            kinds = VECTORS[source]
            stacked = np.concatenate([kind_above(k) for k in kinds], axis=1) if len(kinds) > 1 else kind_above(kinds[0])
            out[source] = tune_and_evaluate(stacked, arrays["q"], splits, np.tile(init, len(kinds)), rounds)
            del stacked
            later = {k for s in sources[i + 1:] for k in VECTORS[s]}
            later |= {"block_input"} if "block_output" in later else set()  # its blocks 2..n are block_input's
            for kind in [k for k in above if k not in later]:  # searched counts no later source reads: freed
                del above[kind]
            if log:
                log(f"{source}: mean Hellinger {out[source][1].mean():.4f} on {len(out[source][1])} evaluation prompts")
        return out

    return fit


def sample_rows(n_strings: int, size: int, seed: int) -> np.ndarray:
    """The vector controls' sample of the string table: ``min(size, n_strings)`` rows drawn without replacement
    by a generator of ``seed``, in table order."""
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n_strings, size=min(size, n_strings), replace=False))


#: The kinds a vector control reads (the block output is made from them: :func:`block_vectors`).
RECORDED = ("block_input", "sa_out", "ffwd_out")


def string_activations(model, ids: np.ndarray, batch: int = 4096) -> dict[str, np.ndarray]:
    """The last-position :data:`RECORDED` kinds of every block for token ids ``[strings n]``, each string its own
    sequence as in the strings dump (:func:`tinylens.core.activations.last_position`, the same floats): kind ->
    ``[strings blocks d_model]`` float32."""
    import torch

    from tinylens.core.activations import CPU_CHUNK, last_position

    device = next(model.parameters()).device
    chunk = min(batch, CPU_CHUNK) if device.type == "cpu" else batch
    parts = []
    with torch.no_grad():
        for start in range(0, len(ids), batch):
            part = torch.from_numpy(np.asarray(ids[start:start + batch], dtype=np.int64)).to(device)
            _, blocks = last_position(model, part, RECORDED, chunk)
            parts.append({k: np.stack([block[k] for block in blocks], axis=1) for k in RECORDED})
    return {k: np.concatenate([p[k] for p in parts]) for k in RECORDED}


def prompt_activations(directory, n_blocks: int, d_model: int, strings: Sequence[str]) -> dict[str, np.ndarray]:
    """The :data:`RECORDED` kinds of a prompt set from its dump (``directory``: its ``block<b>.parquet`` files, made
    for ``strings``): kind -> ``[prompts blocks d_model]``."""
    from tinylens.core.activations import load_block

    return {k: np.stack([load_block(directory, b, k, d_model, strings=strings) for b in range(n_blocks)], axis=1)
            for k in RECORDED}


# --- each block's share, measured alone -------------------------------------------------------------------------


def block_shares(above: np.ndarray, q: np.ndarray, thresholds: np.ndarray, weights: np.ndarray,
                 alone: np.ndarray) -> list[dict]:
    """Per block (0-based): the jointly tuned threshold index and weight, the block's effective share of the
    combined approximation (per prompt its weight times its matched count mass over the weighted total of every
    block, averaged over the prompts with any matched count), its Hellinger distance from the model alone at the
    joint threshold and alone at its own best threshold ``alone`` (index per block), each mean with its standard
    error over the prompts (a prompt with no match in the block gets the uniform distribution, as in
    :func:`~tinylens.core.approx.combine`). above: ``[prompts blocks edges vocab]``, q: ``[prompts vocab]``."""
    n_blocks = above.shape[1]
    joint = select_thresholds(above, thresholds).astype(np.float64)  # [prompts blocks vocab]
    mass = joint.sum(axis=2) * np.asarray(weights, dtype=np.float64)  # [prompts blocks]
    total = mass.sum(axis=1)
    used = total > 0
    share = mass[used] / total[used, None]
    own = select_thresholds(above, alone).astype(np.float64)
    rows = []
    for b in range(n_blocks):
        at_joint, at_own = (_alone_hellinger(c[:, b], q) for c in (joint, own))
        rows.append({"block": b, "threshold_index": int(thresholds[b]), "weight": round(float(weights[b]), 6),
                     "effective_share": round(float(share[:, b].mean()), 6) if used.any() else None,
                     "prompts_with_counts": int(used.sum()),
                     "alone_at_joint_threshold": _mean_se(at_joint), "alone_threshold_index": int(alone[b]),
                     "alone_at_own_threshold": _mean_se(at_own),
                     "alone_no_match": int((own[:, b].sum(axis=1) == 0).sum())})
    return rows


def evaluation_blocks(above: np.ndarray, q: np.ndarray, splits, tuned: Mapping, sweep: Mapping, edges: np.ndarray
                      ) -> list[dict]:
    """:func:`block_shares` on the evaluation prompts of a mode: ``above`` its search summary's cumulative counts,
    ``q`` the model's distributions, ``tuned`` the ``tuned.json`` it is evaluated with, ``sweep`` the single-block
    sweep of the same tuning prompts (each block's own best threshold: :func:`~tinylens.core.approx.block_alone_thresholds`)."""
    from tinylens.core.approx import block_alone_thresholds, tuned_setting

    on_eval = split_masks(splits)["eval"]
    alone = block_alone_thresholds(sweep, edges, above.shape[1])
    return block_shares(above[on_eval], q[on_eval], *tuned_setting(tuned, edges), alone)


def _alone_hellinger(counts: np.ndarray, q: np.ndarray) -> np.ndarray:
    total = counts.sum(axis=1, keepdims=True)
    p = np.where(total > 0, counts / np.where(total > 0, total, 1.0), 1.0 / counts.shape[1])
    return hellinger(p, q)


def _mean_se(values: np.ndarray) -> dict:
    v = np.asarray(values, dtype=np.float64)
    return {"mean": round(float(v.mean()), 6), "standard_error": round(standard_error(v), 6), "n": len(v)}


# --- the summary ------------------------------------------------------------------------------------------------


#: The per-prompt tables of the controls and the sources each holds (rules/controls.smk).
TABLES = {"full_set": ("suffix", "null"), "vectors": tuple(VECTORS)}


def read_controls(paths: Mapping[str, str]) -> dict[str, dict[str, np.ndarray]]:
    """The controls' per-prompt tables (``paths``: name of :data:`TABLES` -> file) joined by prompt: mode ->
    ``{prompt_id, hellinger_<source>...}``. The tables list the same prompts of each mode in the same order (each
    the evaluation prompts in the prompt table's order); tables that do not are an error."""
    from tinylens.core.schemas import controls_schema
    from tinylens.tables import read_columns

    joined: dict[str, dict[str, np.ndarray]] = {}
    for name, path in paths.items():
        cols = read_columns(path, controls_schema(TABLES[name]))
        for mode in dict.fromkeys(cols["mode"].tolist()):
            rows = cols["mode"] == mode
            entry = joined.setdefault(mode, {"prompt_id": cols["prompt_id"][rows]})
            if not np.array_equal(entry["prompt_id"], cols["prompt_id"][rows]):
                raise ValueError(f"{path} lists other {mode} prompts than the other controls' tables; rerun the controls")
            entry.update({f"hellinger_{s}": cols[f"hellinger_{s}"][rows] for s in TABLES[name]})
    return joined


def evaluation_prompts(path, alternates: Sequence[int], n_blocks: int) -> dict[str, np.ndarray]:
    """The evaluation table's ``prompt_id`` and ``hellinger_*`` columns on its evaluation prompts."""
    from tinylens.core.schemas import hellinger_schema
    from tinylens.tables import read_columns

    cols = read_columns(path, hellinger_schema(alternates, n_blocks))
    on_eval = split_masks(cols["split"])["eval"]
    return {k: v[on_eval] for k, v in cols.items() if k == "prompt_id" or k.startswith("hellinger_")}


def source_entry(h: np.ndarray, reference: np.ndarray, reference_name: str) -> dict:
    """One source on one mode's evaluation prompts: its mean Hellinger distance with the standard error, the paired
    test against ``reference`` (the ffwd_out approximation on the same prompts; source minus reference) and the
    verdict."""
    test = paired_difference(h, reference)
    return {**describe(h), "standard_error": round(standard_error(np.asarray(h, dtype=np.float64)), 6),
            "reference": reference_name, "versus_ffwd_out": test, "verdict": verdict(test)}


def mode_summary(evaluation: Mapping[str, np.ndarray], controls: Mapping[str, np.ndarray],
                 alternates: Sequence[int]) -> dict:
    """One mode's sources: ``evaluation``: the evaluation table's columns on its evaluation prompts
    (``prompt_id``, ``hellinger_approx``, ``hellinger_seed<s>``); ``controls``: the controls' columns of this mode
    (``prompt_id``, ``hellinger_<source>``; the vector controls' ``hellinger_ffwd_out`` is ffwd_out on the
    sample). Rows are joined by prompt id; a control prompt the evaluation lacks is an error."""
    ids = np.asarray(evaluation["prompt_id"])
    index = {int(i): r for r, i in enumerate(ids)}
    order = np.asarray([index.get(int(i), -1) for i in controls["prompt_id"]])
    if (order < 0).any() or len(order) != len(ids):
        raise ValueError("the controls' evaluation prompts are not the evaluation table's; rerun the controls")
    full = np.asarray(evaluation["hellinger_approx"], dtype=np.float64)[order]
    sources = {"ffwd_out": {**describe(full), "standard_error": round(standard_error(full), 6)}}
    for key in ("suffix", "null"):
        sources[key] = source_entry(controls[f"hellinger_{key}"], full, "ffwd_out")
    sample = np.asarray(controls["hellinger_ffwd_out"], dtype=np.float64)
    sources["ffwd_out_sample"] = source_entry(sample, full, "ffwd_out")
    for key in VECTORS:
        if key != "ffwd_out":
            sources[key] = source_entry(controls[f"hellinger_{key}"], sample, "ffwd_out_sample")
    for s in alternates:  # the reference line of method.md §6, judged there: its mean and standard error only
        h = np.asarray(evaluation[f"hellinger_seed{s}"], dtype=np.float64)[order]
        sources[f"seed{s}"] = {**describe(h), "standard_error": round(standard_error(h), 6)}
    return {"n": len(order), "sources": sources}


def controls_metrics(per_mode: Mapping[str, dict], tuned: Mapping[str, Mapping], blocks: Mapping[str, list]) -> dict:
    """``metrics/controls.json``: per mode the sources (:func:`mode_summary`), the values each was tuned to and the
    blocks (:func:`block_shares`, from the mode's evaluation summary); the settings; a flat headline. ``tuned``: the
    tuned JSON of each table of :data:`TABLES` by name (per mode, and the settings the job read)."""
    settings = {"suffix_lengths": tuned["full_set"]["suffix_lengths"], "null_seed": tuned["full_set"]["null_seed"],
                "sample_strings": tuned["vectors"]["strings"], "of_strings": tuned["vectors"]["of_strings"],
                "sample_seed": tuned["vectors"]["seed"]}
    headline, modes = {}, {}
    for mode, m in per_mode.items():
        for key, s in m["sources"].items():
            headline[f"{mode}_{key}_mean"] = s["mean"]
            if "versus_ffwd_out" in s:
                headline[f"{mode}_{key}_difference"] = s["versus_ffwd_out"]["mean_difference"]
        values = {k: v for name in TABLES for k, v in tuned[name].get(mode, {}).items()}
        modes[mode] = {**m, "tuned": values, "blocks": list(blocks.get(mode, []))}
    return {"headline": headline, "settings": settings, "verdicts": list(VERDICTS), "modes": modes}
