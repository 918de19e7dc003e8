"""The strings dump (rule dump_activations) against the code it replaced, in one process, as CPU-second ratios.

    python benchmarks/dump_activations.py                         # 50,000 strings, the small preset's model shape
    python benchmarks/dump_activations.py --strings 20000 --rounds 3 --old-threads 2

The model is the preset's shape with random weights (a trained one costs the same). The strings are a run of
``--strings`` of the corpus's distinct ``substring_length``-character windows, sorted, as the strings table holds
them (the current dump computes each distinct prefix once). Each round runs the reference (one
forward of a whole ``dump_batch_size`` batch recording every kind, conversion and Parquet writing in turn, with
``--old-threads`` torch threads: the rule's threads before) and the current :func:`tinylens.core.activations.dump_activations`
(``--new-threads``), alternating, and reports process CPU seconds (every thread's, what a loaded machine does not
inflate much) and wall seconds. The two dumps' values must agree to float32 rounding (1e-5), or it stops. Also prints the
reference's time split into forward, conversion to Arrow, and Parquet writing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import torch
import yaml

from tinylens.config import model_config, resolve_preset
from tinylens.core.activations import (
    STRINGS_KEY,
    block_path,
    block_schema,
    dump_activations,
    load_block,
    logits_schema,
    strings_digest,
)
from tinylens.core.corpus import CharTokenizer
from tinylens.interventions import record_activations
from tinylens.model import Transformer
from tinylens.tables import table_writer

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from workflow_times import machine  # noqa: E402


@torch.no_grad()
def reference_dump(model: Transformer, tokenizer: CharTokenizer, strings: Sequence[str], out_dir: str | Path,
                   kinds: Sequence[str], batch_size: int = 4096, split: dict[str, float] | None = None) -> None:
    """The dump as it was: one forward per batch recording every kind, then conversion and writing in turn.
    ``split``: CPU seconds of each part are added to it."""
    split = split if split is not None else {}
    model.eval()
    cfg = model.config
    n = len(strings[0])
    ids = tokenizer.encode("".join(strings)).reshape(len(strings), n)
    schema = block_schema(kinds, cfg.d_model)
    footer = {STRINGS_KEY: strings_digest(strings)}
    with ExitStack() as stack:
        writers = [stack.enter_context(table_writer(block_path(out_dir, b), schema, metadata=footer))
                   for b in range(cfg.n_layer)]
        write_logits = stack.enter_context(table_writer(Path(out_dir) / "logits.parquet", logits_schema(cfg.vocab_size),
                                                        metadata=footer))
        for start in range(0, len(strings), batch_size):
            t0 = time.process_time()
            batch = torch.from_numpy(ids[start : start + batch_size].astype(np.int64))
            logits, acts = record_activations(model, batch, positions="last", patterns=False)
            t1 = time.process_time()
            columns = [{k: acts[k][b].float().cpu().numpy() for k in kinds} for b in range(cfg.n_layer)]
            t2 = time.process_time()
            for write, block in zip(writers, columns, strict=True):
                write(block)
            write_logits({"logits": logits.float().cpu().numpy()})
            t3 = time.process_time()
            for part, seconds in (("forward", t1 - t0), ("numpy", t2 - t1), ("arrow + parquet", t3 - t2)):
                split[part] = split.get(part, 0.0) + seconds


def timed(fn, threads: int) -> tuple[float, float]:
    torch.set_num_threads(threads)
    cpu, wall = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - cpu, time.perf_counter() - wall


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="small")
    parser.add_argument("--corpus", type=Path, default=REPO.parent / "shared/data/tinyshakespeare/input.txt")
    parser.add_argument("--strings", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--old-threads", type=int, default=2, help="torch threads of the reference")
    parser.add_argument("--new-threads", type=int, default=1, help="torch threads of the current dump")
    args = parser.parse_args(argv)
    config = yaml.safe_load((REPO / "config/config.yaml").read_text(encoding="utf-8"))
    preset = resolve_preset(config, args.preset)
    analysis, length = preset["analysis"], config["substring_length"]
    text = args.corpus.read_text(encoding="utf-8")
    tokenizer = CharTokenizer.fit(text)
    torch.manual_seed(0)
    model = Transformer(model_config({**preset["model"], "dropout": 0.0}, tokenizer.vocab_size)).eval()
    # as the strings dump reads them: distinct windows of the text, sorted (a run of them from the middle)
    windows = sorted({text[o : o + length] for o in range(len(text) - length + 1)})
    start = max(0, (len(windows) - args.strings) // 2)
    strings = windows[start : start + args.strings]
    kinds, batch_size = analysis["string_kinds"], analysis["dump_batch_size"]
    for key, value in machine().items():
        print(f"- {key}: {value}")
    print(f"\n{args.strings:,} strings of {length}, preset {args.preset} (d_model {model.config.d_model}, "
          f"{model.config.n_layer} blocks), kinds {kinds}, batch {batch_size}; reference {args.old_threads} "
          f"thread(s), current {args.new_threads}\n")
    old_times, new_times, split = [], [], {}
    with tempfile.TemporaryDirectory() as tmp:
        old_dir, new_dir = Path(tmp, "old"), Path(tmp, "new")
        old_dir.mkdir(), new_dir.mkdir()
        for round_ in range(args.rounds):
            parts = split if round_ == 0 else None
            old_times.append(timed(lambda parts=parts: reference_dump(model, tokenizer, strings, old_dir, kinds,
                                                                      batch_size, parts), args.old_threads))
            new_times.append(timed(lambda: dump_activations(model, tokenizer, strings, new_dir, kinds, batch_size,
                                                            progress=False), args.new_threads))
            worst = max(float(np.abs(load_block(old_dir, b, k, model.config.d_model)
                                     - load_block(new_dir, b, k, model.config.d_model)).max())
                        for b in range(model.config.n_layer) for k in kinds)
            if worst > 1e-5:
                raise SystemExit(f"the dumps differ by up to {worst:.2e}")
    print("| round | reference CPU s | current CPU s | ratio | reference wall s | current wall s | ratio |")
    print("|---|---|---|---|---|---|---|")
    for i, ((oc, ow), (nc, nw)) in enumerate(zip(old_times, new_times, strict=True), 1):
        print(f"| {i} | {oc:.2f} | {nc:.2f} | {nc / oc:.2f} | {ow:.2f} | {nw:.2f} | {nw / ow:.2f} |")
    ratio = statistics.median(n[0] / o[0] for o, n in zip(old_times, new_times, strict=True))
    print(f"\nmedian CPU ratio current/reference: {ratio:.2f}; the values agree to {worst:.1e} (float32 rounding)")
    total = sum(split.values())
    print("reference's CPU seconds, round 1: " + ", ".join(f"{k} {v:.2f} ({v / total:.0%})" for k, v in split.items()))


if __name__ == "__main__":
    sys.exit(main())
