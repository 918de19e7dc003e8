"""Explain any prompt from a finished run's artifacts (method.md §6, the case studies, for a prompt of your choice).

``tinylens explain PROMPT`` (or :func:`explain`) reads what the workflow wrote under
``results/<preset>/``: the original model, the table of strings with their next-token counts, the
strings' ``ffwd_out`` dumps and the tuned thresholds and weights of the corpus mode. For the prompt
it finds every string whose ``ffwd_out`` is within the smallest threshold of the grid of the
prompt's, per block, exactly as rule ``case_studies`` does (:mod:`tinylens.core.case_studies`), and
reports per block: the tuned threshold and weight, the number of matching strings above it with
examples, the approximation from that block alone; and the combined approximation, each against
the model's next-token distribution (top tokens, Hellinger). For the five configured case-study
prompts its ``case_study`` entry is the case-study summary itself (tests/test_explain.py).

>>> from tinylens.explain import explain                            # doctest: +SKIP
>>> e = explain("And only l", preset="small")
>>> e["combined"]["hellinger"], [b["matches"] for b in e["blocks"]]
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from tqdm.auto import tqdm

#: The repository's config, read when the working directory has none (a run made with ``-d``).
REPO_CONFIG = Path(__file__).resolve().parents[2] / "config" / "config.yaml"
#: Exit code of a prompt that cannot be explained (wrong length, a character outside the vocabulary).
BAD_PROMPT = 2


class PromptError(ValueError):
    """A prompt the run cannot explain: the message names the problem and what to give instead."""


@dataclass(frozen=True)
class Run:
    """Where a finished run's files are, and the settings its case studies used."""

    results: Path  # results/<preset>
    seed: int  # the original seed: the model whose strings were dumped
    min_cosine: float  # the smallest threshold of the grid: matches are kept above it
    length: int  # substring_length: the characters of every string and prompt

    @property
    def model_dir(self) -> Path:
        return self.results / f"models/seed{self.seed}"

    @property
    def strings(self) -> Path:
        return self.results / "strings/strings.parquet"

    @property
    def string_dumps(self) -> Path:
        return self.results / f"activations/seed{self.seed}/strings"

    @property
    def tuned(self) -> Path:
        return self.results / "approx/corpus/tuned.json"

    @property
    def case_studies(self) -> Path:
        return self.results / "case_studies/summary.json"


def find_run(preset: str = "small", workdir: str | Path = ".", config: str | Path | None = None) -> Run:
    """The finished run of ``preset`` under ``workdir``; settings from ``config`` (default: the working
    directory's config/config.yaml, else the repository's). Missing files: an error naming them."""
    workdir = Path(workdir)
    if config is None:
        config = workdir / "config/config.yaml" if (workdir / "config/config.yaml").exists() else REPO_CONFIG
    cfg = yaml.safe_load(Path(config).read_text(encoding="utf-8"))
    run = Run(workdir / "results" / preset, int(cfg["seeds"]["original"]), float(cfg["threshold_grid"]["start"]),
              int(cfg["substring_length"]))
    needed = [run.model_dir / "config.json", run.model_dir / "model.safetensors", run.model_dir / "tokenizer.json",
              run.strings, run.tuned, run.string_dumps / "block0.parquet"]
    missing = [str(p) for p in needed if not p.exists()]
    if missing:
        raise FileNotFoundError(
            f"no finished '{preset}' run under {workdir.resolve()}: missing {', '.join(missing)}. Run "
            f"`snakemake --cores all core --config preset={preset}` there, or `dvc pull workflow@{preset}` and "
            f"`tinylens restore --preset {preset}`, or pass --workdir (the folder holding results/)")
    return run


def fit_prompt(text: str, length: int, vocab: Sequence[str]) -> tuple[str, str | None]:
    """(the prompt of ``length`` characters, a note when ``text`` was longer and cut to its last characters).

    A shorter text or a character outside ``vocab`` is a :class:`PromptError` naming it."""
    if len(text) < length:
        raise PromptError(f"the prompt {text!r} has {len(text)} characters; this run's prompts have exactly "
                          f"{length} (substring_length): give {length} characters (a longer text is cut to its last "
                          f"{length})")
    note = None
    if len(text) > length:
        note = f"the text has {len(text)} characters; explaining its last {length}: {text[-length:]!r}"
        text = text[-length:]
    known = set(vocab)
    bad = sorted({c for c in text if c not in known})
    if bad:
        where = [i for i, c in enumerate(text) if c not in known]
        raise PromptError(f"the prompt {text!r} has {len(bad)} character(s) outside the corpus' vocabulary: "
                          f"{', '.join(repr(c) for c in bad)} (position(s) {where}); use characters of "
                          f"{''.join(vocab)!r}")
    return text, note


def top_tokens(p: np.ndarray, vocab: Sequence[str], top: int) -> list[list]:
    """The ``top`` most likely tokens of ``p``: [[token, probability], ...], ties by token index."""
    order = np.argsort(-p, kind="stable")[:top]
    return [[vocab[i], round(float(p[i]), 6)] for i in order]


def explain(text: str, preset: str = "small", workdir: str | Path = ".", config: str | Path | None = None,
            top: int = 8, progress: bool = True) -> dict[str, Any]:
    """What the model does with ``text`` (its last ``substring_length`` characters), from a finished run.

    Returns a JSON-able dict: ``prompt``, ``note`` (set when the text was cut), ``model`` (top tokens),
    ``blocks`` (per block: threshold, weight, matches, examples, the block-alone approximation's top
    tokens and Hellinger), ``combined`` (the tuned approximation over all blocks), ``vocab`` and
    ``case_study`` (exactly the case-study summary rule ``case_studies`` writes for this prompt)."""
    from tinylens.core.corpus import CharTokenizer

    run = find_run(preset, workdir, config)
    tokenizer = CharTokenizer.load(run.model_dir / "tokenizer.json")
    prompt, note = fit_prompt(text, run.length, tokenizer.vocab)
    # torch and the analysis code only once the run and the prompt are known good: a bad prompt or a
    # missing run is reported in a fraction of a second instead of after torch's 2-3 s import.
    from tinylens.atomic import read_json
    from tinylens.core.activations import load_block
    from tinylens.core.case_studies import approximation, find_matches, prompt_activations, summarize
    from tinylens.core.strings import load_strings
    from tinylens.measures import hellinger
    from tinylens.weights import load_model

    model = load_model(run.model_dir)
    n_layer, d_model = model.config.n_layer, model.config.d_model
    vectors, q = prompt_activations(model, tokenizer, [prompt])
    with tqdm(total=n_layer + 1, desc="reading the run's dumps", unit="file", disable=not progress,
              file=sys.stderr) as bar:
        table = load_strings(run.strings, tokenizer.vocab_size)
        bar.update()

        def string_block(b: int) -> np.ndarray:
            block = load_block(run.string_dumps, b, "ffwd_out", d_model, strings=table.strings)
            bar.update()
            return block

        matches = find_matches(vectors, string_block, run.min_cosine)
    per_block = [matches[b][0] for b in range(n_layer)]
    tuned = read_json(run.tuned)
    counts = table.counts("corpus")
    case = summarize(prompt, q[0], per_block, table.strings, counts, tuned, tuned.get("paper_values"))
    vocab = list(tokenizer.vocab)
    blocks = []
    for b, (threshold, weight) in enumerate(zip(tuned["thresholds"], tuned["weights"], strict=True)):
        alone = [0.0] * n_layer
        alone[b] = 1.0
        p, n = approximation(per_block, counts, tuned["thresholds"], alone)
        blocks.append({"block": b, "threshold": threshold, "weight": weight, "matches": n[b],
                       "examples": case["examples"][b],
                       "alone": {"hellinger": round(float(hellinger(p, q[0])), 6), "top": top_tokens(p, vocab, top)}})
    p_all = np.asarray(case["tuned"]["distribution"])
    return {
        "prompt": prompt, "text": text, "note": note, "preset": preset, "seed": run.seed,
        "model": top_tokens(q[0], vocab, top),
        "blocks": blocks,
        "combined": {"hellinger": case["tuned"]["hellinger"], "matches": case["tuned"]["matches"],
                     "top": top_tokens(p_all, vocab, top)},
        "vocab": vocab,
        "case_study": case,
    }


def _shown(tokens: list[list]) -> str:
    return "  ".join(f"{t!r}:{p:.3f}" for t, p in tokens)


def render(e: dict[str, Any]) -> str:
    """The explanation as the lines ``tinylens explain`` prints."""
    lines = [f"prompt {e['prompt']!r} ({e['preset']} run, model seed {e['seed']})"]
    if e["note"]:
        lines.append(f"note: {e['note']}")
    lines.append(f"model next token:     {_shown(e['model'])}")
    lines.append(f"combined (all blocks): Hellinger {e['combined']['hellinger']:.3f}   {_shown(e['combined']['top'])}")
    for b in e["blocks"]:
        lines.append(f"block {b['block'] + 1}: threshold {b['threshold']:.2f} weight {b['weight']:g}, "
                     f"{b['matches']} matching strings; alone: Hellinger {b['alone']['hellinger']:.3f}")
        lines.append(f"    alone: {_shown(b['alone']['top'])}")
        if b["examples"]:
            lines.append("    e.g. " + ", ".join(repr(s) for s in b["examples"]))
    return "\n".join(lines)


def output_name(prompt: str) -> str:
    """A file name for ``prompt``: its letters and digits, and a short hash so distinct prompts never collide."""
    slug = re.sub(r"[^A-Za-z0-9]+", "_", prompt).strip("_") or "prompt"
    return f"{slug}-{hashlib.sha256(prompt.encode()).hexdigest()[:8]}"


def write(e: dict[str, Any], out_dir: str | Path) -> tuple[Path, Path]:
    """Write the explanation as JSON and its figure as PNG into ``out_dir``, atomically."""
    from tinylens.atomic import write_json
    from tinylens.core.plots import make_explanation
    from tinylens.plots import save_figure

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    base = out_dir / output_name(e["prompt"])
    json_path, png_path = base.with_suffix(".json"), base.with_suffix(".png")
    write_json(json_path, e)
    save_figure(make_explanation(e), png_path)
    return json_path, png_path


def run(args: argparse.Namespace) -> int:
    """``tinylens explain PROMPT`` (its arguments: :mod:`tinylens.cli`): print the explanation, write its JSON
    and PNG; exit status :data:`BAD_PROMPT` for a prompt the run cannot explain, 1 for a run that is not there."""
    try:
        e = explain(args.prompt, args.preset, args.workdir, args.config, top=args.top)
    except PromptError as err:
        print(f"tinylens explain: {err}", file=sys.stderr)
        return BAD_PROMPT
    except FileNotFoundError as err:
        print(f"tinylens explain: {err}", file=sys.stderr)
        return 1
    print(render(e))
    json_path, png_path = write(e, args.out or args.workdir / "results" / args.preset / "explain")
    print(f"wrote {json_path} and {png_path}")
    return 0
