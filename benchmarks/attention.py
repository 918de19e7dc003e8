"""Time the attention-dynamics family's four heavy steps at a preset's scale, on the available device.

The same library calls the workflow's rules make (spectra, tuned-lens training, trajectories,
speaker probes), with that preset's ``attention:`` settings and model shape, on a model with
random weights (the timings do not depend on training), reading the token files of a finished
run for the windows and passages.

    python benchmarks/attention.py --preset paper --data results/small/data --json out.json
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch
import yaml

from tinylens.attention.probes import choose_speakers, passages, pooled_features, probe_by_depth
from tinylens.attention.spectra import measure_heads
from tinylens.attention.trajectories import collect_positions, evenly_spaced_windows, measure_trajectories
from tinylens.attention.tuned_lens import LensTraining, train_tuned_lens
from tinylens.config import model_config, resolve_preset
from tinylens.core.corpus import CharTokenizer, load_ids
from tinylens.devices import select_device
from tinylens.model import Transformer

REPO = Path(__file__).resolve().parents[1]


def timed(device: torch.device, fn):
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    out = fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return out, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="paper")
    parser.add_argument("--data", type=Path, required=True, help="a run's data/ folder (train.npy, val.npy, tokenizer.json)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    preset = resolve_preset(config, args.preset)
    settings = preset["attention"]
    device = select_device(args.device)
    tokenizer = CharTokenizer.load(args.data / "tokenizer.json")
    torch.manual_seed(0)
    model = Transformer(model_config(preset["model"], tokenizer.vocab_size)).to(device).eval()
    block = model.config.block_size
    train_ids, val_ids = load_ids(args.data / "train.npy"), load_ids(args.data / "val.npy")
    times = {}

    windows = torch.from_numpy(evenly_spaced_windows(val_ids, settings["sequences"], block)).to(device)
    _, times["attention_spectra"] = timed(device, lambda: measure_heads(
        model, windows, settings["walk_doublings"], settings["eigen_sample"], progress=False))

    def lens():
        pool = torch.from_numpy(evenly_spaced_windows(train_ids, settings["lens_sequences"], block)).to(device)
        resid, final = collect_positions(model, pool)
        return train_tuned_lens(model, resid[:-1], final, LensTraining(**settings["tuned_lens"]), progress=False)[0]
    tuned, times["train_tuned_lens"] = timed(device, lens)

    windows = torch.from_numpy(evenly_spaced_windows(val_ids, settings["sequences"], block + 1)).to(device)
    _, times["measure_trajectories"] = timed(device, lambda: measure_trajectories(model, windows, tuned))

    def probe():
        probe = settings["probe"]
        texts = {"train": tokenizer.decode(train_ids), "val": tokenizer.decode(val_ids)}
        speakers = choose_speakers(texts["train"], texts["val"], probe["speakers"], probe["min_speeches"])
        chunks = {k: passages(t, speakers, block, probe["min_chars"]) for k, t in texts.items()}
        feats = {k: pooled_features(model, [tokenizer.encode(x.text) for x in c]) for k, c in chunks.items()}
        return probe_by_depth(feats["train"], [x.speaker for x in chunks["train"]], feats["val"],
                              [x.speaker for x in chunks["val"]], c=probe["C"], shuffles=probe["shuffles"])
    _, times["probe_speakers"] = timed(device, probe)

    result = {"preset": args.preset, "device": torch.cuda.get_device_name(device) if device.type == "cuda"
              else f"cpu ({platform.processor() or platform.machine()}, {args.threads} threads)",
              "torch": torch.__version__, "n_params": model.n_params(), "seconds": times}
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
