"""Jobs with glibc's default malloc against the thresholds the Snakefile sets, as whole-process ratios.

    python benchmarks/malloc.py                 # 3 rounds of each, the small preset's model shape
    python benchmarks/malloc.py --rounds 5 --steps 300 --checkpoints 4

Each round runs one workload twice, alternating, in fresh processes: once with the environment as it is (the
``MALLOC_*`` variables removed) and once with the Snakefile's (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``,
``MALLOC_TOP_PAD_``). The workload is what most of the default run's CPU goes to: ``--steps`` training steps of the
preset's model (AdamW, batch and context of the preset) and ``--checkpoints`` rounds of the training-dynamics
measures of one checkpoint (:func:`tinylens.dynamics.measure.measure_checkpoint` on the preset's probes), random
weights and random tokens (the same work as trained ones). Reported per setting: median wall, user and system
CPU seconds, and minor page faults (the child's ``getrusage``), and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from workflow_times import machine  # noqa: E402

WORKLOAD = """
import sys, yaml, numpy as np, torch
torch.set_num_threads(1)
from tinylens.config import model_config, resolve_preset
from tinylens.dynamics.measure import measure_checkpoint
from tinylens.dynamics.probes import MeasureSettings, make_probes
from tinylens.model import Transformer
preset = resolve_preset(yaml.safe_load(open(sys.argv[1])), sys.argv[2])
steps, checkpoints = int(sys.argv[3]), int(sys.argv[4])
cfg = model_config(preset["model"], 65)
torch.manual_seed(0)
model = Transformer(cfg)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
ids = torch.randint(0, 65, (200_000,), generator=torch.Generator().manual_seed(0))
batch = preset["train"]["batch_size"]
for step in range(steps):
    start = torch.randint(0, len(ids) - cfg.block_size - 1, (batch,))
    chunk = ids[start[:, None] + torch.arange(cfg.block_size + 1)]
    _, loss = model(chunk[:, :-1], chunk[:, 1:])
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
settings = MeasureSettings(**preset["dynamics"]["measure"])
probes = make_probes(ids.numpy()[:150_000], ids.numpy()[150_000:], 65, cfg.block_size, settings)
model.eval()
for _ in range(checkpoints):
    measure_checkpoint(model, probes, settings)
"""


def snakefile_malloc() -> dict[str, str]:
    """The ``MALLOC_*`` settings the Snakefile puts in every job's environment, read from the Snakefile itself."""
    text = (REPO / "Snakefile").read_text(encoding="utf-8")
    found = re.search(r"^MALLOC_SETTINGS = (\{.*?^\})", text, re.S | re.M)
    if not found:
        raise SystemExit("no MALLOC_ settings found in the Snakefile")
    return {name: str(value) for name, value in eval(found.group(1)).items()}  # noqa: S307 (our own literal)


def run_once(env: dict[str, str], args: argparse.Namespace) -> dict[str, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", WORKLOAD, str(REPO / "config/config.yaml"), args.preset, str(args.steps),
                    str(args.checkpoints)], env=env, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"wall": wall, "user": after.ru_utime - before.ru_utime, "sys": after.ru_stime - before.ru_stime,
            "faults": after.ru_minflt - before.ru_minflt}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="small")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=200, help="training steps per run")
    parser.add_argument("--checkpoints", type=int, default=6, help="dynamics measures per run")
    args = parser.parse_args()
    plain = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    plain["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "src"), plain.get("PYTHONPATH")) if p)
    settings = snakefile_malloc()
    tuned = {**plain, **settings}
    for key, value in machine().items():
        print(f"{key}: {value}")
    print(f"workload: {args.steps} training steps + {args.checkpoints} dynamics measures, preset {args.preset}; "
          f"{args.rounds} rounds; tuned = {settings}")
    results: dict[str, list[dict]] = {"default": [], "tuned": []}
    for r in range(args.rounds):
        for name, env in (("default", plain), ("tuned", tuned)):
            results[name].append(run_once(env, args))
            print(f"round {r + 1} {name:8s} " + "  ".join(f"{k} {v:,.2f}" for k, v in results[name][-1].items()),
                  flush=True)
    medians = {name: {k: statistics.median(run[k] for run in runs) for k in runs[0]} for name, runs in results.items()}
    print("| setting | wall s | user s | system s | minor faults |")
    print("|---|---|---|---|---|")
    for name, m in medians.items():
        print(f"| {name} | {m['wall']:.2f} | {m['user']:.2f} | {m['sys']:.2f} | {m['faults']:,.0f} |")
    d, t = medians["default"], medians["tuned"]
    print(f"tuned / default: wall {t['wall'] / d['wall']:.3f}, user + system "
          f"{(t['user'] + t['sys']) / (d['user'] + d['sys']):.3f}, system {t['sys'] / max(d['sys'], 1e-9):.3f}, "
          f"faults {t['faults'] / max(d['faults'], 1):.3f}")


if __name__ == "__main__":
    main()
