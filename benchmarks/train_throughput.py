"""Training throughput of the model against the unfused per-head reference, in one run.

Measures tokens/s of full training steps (forward, backward, AdamW) for
``tinylens.model.Transformer`` (fused QKV + scaled_dot_product_attention) and
``tinylens.reference.ReferenceTransformer`` (one module per head, explicit
softmax: the original code), on the same batches, and estimates MFU:

    MFU = FLOPs/token (6 N + 12 L d T) x tokens/s / peak FLOP/s

Peak FLOP/s: the vendor's dense bf16 figure for known GPUs; on a CPU, an fp32
matrix multiply measured in the same run with the same threads (so CPU MFU
means "fraction of what this machine's GEMM reaches").

    python benchmarks/train_throughput.py                    # paper model, auto device
    python benchmarks/train_throughput.py --batch-size 4 --steps 5 --json out.json
    python benchmarks/train_throughput.py --device cuda --compile default reduce-overhead   # + torch.compile'd steps
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch
import yaml

from tinylens.config import model_config, resolve_preset
from tinylens.devices import select_device
from tinylens.model import Transformer, estimate_flops_per_token
from tinylens.reference import ReferenceTransformer, load_fused_weights
from tinylens.train import autocast_for, compiled

REPO = Path(__file__).resolve().parents[1]

#: Dense bf16 tensor-core peaks (FLOP/s), from the vendors' data sheets.
GPU_PEAK_BF16 = {"H100": 989.4e12, "H200": 989.4e12, "A100": 312e12, "L4": 121e12, "A10": 125e12}


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def peak_flops(device: torch.device) -> tuple[float, str]:
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        for key, value in GPU_PEAK_BF16.items():
            if key in name:
                return value, f"{name} dense bf16 data-sheet peak"
        raise SystemExit(f"unknown GPU {name!r}: add its dense bf16 peak to GPU_PEAK_BF16")
    n = 2048
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    times = []
    for _ in range(5):
        t = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t)
    return 2 * n**3 / min(times), f"measured fp32 {n}x{n} GEMM, {torch.get_num_threads()} threads"


def time_steps(model: Transformer, batches, device: torch.device, warmup: int,
               compile_mode: str | None = None) -> tuple[list[float], float]:
    """Seconds per training step (forward, backward, AdamW) after ``warmup`` steps, and the seconds of
    the warm-up steps (which include compiling)."""
    model.train()
    step_model = compiled(model, compile_mode)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=device.type == "cuda")
    times, warm = [], 0.0
    for i, (x, y) in enumerate(batches):
        sync(device)
        t = time.perf_counter()
        with autocast_for(device):
            _, loss = step_model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sync(device)
        if i >= warmup:
            times.append(time.perf_counter() - t)
        else:
            warm += time.perf_counter() - t
    return times, warm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="paper", help="preset whose model is measured (default: paper)")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--batch-size", type=int, help="sequences per step (default: the preset's)")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per model")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    parser.add_argument("--threads", type=int, help="CPU threads (default: torch's)")
    parser.add_argument("--compile", nargs="*", default=[], help="also time the fused model torch.compile'd "
                        "with these modes (tinylens.train.COMPILE_MODES)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()

    if args.threads:
        torch.set_num_threads(args.threads)
    device = select_device(args.device)
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    preset = resolve_preset(config, args.preset)
    cfg = model_config(preset["model"], vocab_size=65)
    batch = args.batch_size or preset["train"]["batch_size"]
    tokens = batch * cfg.block_size
    gen = torch.Generator().manual_seed(0)
    batches = [
        (x.to(device), y.to(device))
        for x, y in (
            torch.randint(0, cfg.vocab_size, (2, batch, cfg.block_size), generator=gen)
            for _ in range(args.warmup + args.steps)
        )
    ]

    peak, peak_source = peak_flops(device)
    flops_token = estimate_flops_per_token(cfg)
    torch.manual_seed(0)
    fused = Transformer(cfg).to(device)
    reference = load_fused_weights(ReferenceTransformer(cfg), fused).to(device)
    results = {}
    runs = [("reference (per-head)", reference, None), ("tinylens (fused)", fused, None)]
    runs += [(f"tinylens (fused), torch.compile {mode}", fused, mode) for mode in args.compile]
    for name, model, mode in runs:
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        times, warm = time_steps(model, batches, device, args.warmup, mode)
        step = statistics.median(times)
        results[name] = {
            "s_per_step": step,
            "tokens_per_s": tokens / step,
            "mfu": flops_token * tokens / step / peak,
            "warmup_s": warm,
            "peak_gpu_mib": torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None,
        }
    speedup = results["reference (per-head)"]["s_per_step"] / results["tinylens (fused)"]["s_per_step"]

    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu"
    print(f"preset {args.preset}: {fused.n_params():,} parameters, batch {batch} x {cfg.block_size} tokens, "
          f"{flops_token / 1e6:.1f} MFLOP/token")
    print(f"device {device_name} ({device.type}, {torch.get_num_threads()} threads), torch {torch.__version__}")
    print(f"peak {peak / 1e12:.3f} TFLOP/s ({peak_source})")
    print("| model | s/step | tokens/s | MFU | warm-up steps (s, incl. compiling) |")
    print("|---|---|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r['s_per_step']:.4f} | {r['tokens_per_s']:,.0f} | {100 * r['mfu']:.1f}% "
              f"| {r['warmup_s']:.1f} |")
    print(f"fused vs reference: {speedup:.2f}x")
    if args.json:
        args.json.write_text(json.dumps({
            "preset": args.preset, "batch_size": batch, "block_size": cfg.block_size, "device": device_name,
            "threads": torch.get_num_threads(), "torch": torch.__version__, "peak_flops": peak,
            "peak_source": peak_source, "results": results, "speedup": speedup,
        }, indent=2))


if __name__ == "__main__":
    main()
