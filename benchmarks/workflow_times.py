"""Where a finished run's time went, per named target: every job's Snakemake benchmark record,
grouped by the rules file (the target) whose rule wrote it.

    python benchmarks/workflow_times.py results/small            # a Markdown table
    python benchmarks/workflow_times.py results/small --jobs     # and one row per job
    python benchmarks/workflow_times.py results/paper_short --jobs --log run.log  # and each job's declared mem_mb
    python benchmarks/workflow_times.py --machine              # only the machine: CPU, vector extensions, torch

Per target: jobs, summed wall seconds, summed CPU seconds (the work itself, which a loaded
machine does not inflate much), the largest peak RSS. With ``--log`` (Snakemake's output of the
run, e.g. its ``.snakemake/log/*.snakemake.log``, or of ``snakemake -n --forceall``) also, per
job, the ``mem_mb`` it declared (jobs whose peak exceeded it are counted) and the size of the
outputs it wrote, as they are on disk now. Jobs overlap on several cores, so the
run's own wall time is printed separately: from the earliest job start (a record's file time
minus its wall seconds) to the last record written. Rerun jobs overwrite their records, so run
it on a run made in one go (a fresh clone) for a run's true span.

The table starts with the machine it is read on (CPU model, cores, the vector extensions the
CPU reports, torch's version and the kernels it dispatches to, and the environment variables that
restrict them), so a row of docs/benchmarks.md can name its machine class: run it on the machine
that made the run. ``--machine`` prints that alone.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: The rules files of the core reproduction (`rule core`); every other rules file is one family target.
CORE_FILES = {"common", "corpus", "train", "sample", "strings", "activations", "search", "approx", "controls", "figures"}
#: A rule's benchmark directive: ``results("benchmarks/NAME.tsv")``, or through the figure table's own
#: folder function (``row["under"]("benchmarks/plot_{figure}.tsv")``, rules/figures.smk).
BENCHMARK = re.compile(r'benchmark:\s*\n\s*(?:results|row\["under"\])\(f?"benchmarks/([^"]+)\.tsv"\)')


#: The vector extensions that decide which kernels torch and oneDNN can use, as /proc/cpuinfo names them.
VECTOR_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
                "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8", "asimd", "sve", "sve2")
#: Environment variables that restrict or size the kernels (torch's capability, oneDNN's ISA, threads).
KERNEL_ENV = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def cpu_flags(cpuinfo: str) -> tuple[str, list[str]]:
    """(CPU model name, the :data:`VECTOR_FLAGS` it reports) from the text of /proc/cpuinfo."""
    model = re.search(r"^(?:model name|Model|Hardware)\s*:\s*(.+)$", cpuinfo, re.M)
    flags = re.search(r"^(?:flags|Features)\s*:\s*(.+)$", cpuinfo, re.M)
    present = set(flags.group(1).split()) if flags else set()
    return (model.group(1).strip() if model else platform.processor() or platform.machine(),
            [f for f in VECTOR_FLAGS if f in present])


def machine(cpuinfo_path: Path = Path("/proc/cpuinfo")) -> dict[str, str]:
    """The machine this runs on, as the rows of a benchmark's header: what a row of docs/benchmarks.md names."""
    cpuinfo = cpuinfo_path.read_text(encoding="utf-8", errors="replace") if cpuinfo_path.exists() else ""
    model, flags = cpu_flags(cpuinfo)
    family = re.search(r"^cpu family\s*:\s*(\d+)", cpuinfo, re.M)
    info = {"CPU": model + (f" (family {family.group(1)})" if family else ""), "cores": str(os.cpu_count()),
            "platform": platform.platform(),
            "vector extensions (CPU)": " ".join(flags) or "unknown (no /proc/cpuinfo)"}
    try:
        import torch
    except ImportError:
        info["torch"] = "not installed"
    else:
        info["torch"] = f"{torch.__version__} (CUDA {torch.version.cuda or 'none'})"
        info["torch CPU capability"] = torch.backends.cpu.get_cpu_capability()
        info["torch threads"] = str(torch.get_num_threads())
        info["oneDNN (mkldnn)"] = "yes" if torch.backends.mkldnn.is_available() else "no"
        info["MKL"] = "yes" if torch.backends.mkl.is_available() else "no"
        info["GPU"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    info["kernel environment"] = " ".join(f"{k}={os.environ[k]}" for k in KERNEL_ENV if k in os.environ) or "unset"
    return info


def record_patterns(rules_dir: Path = REPO / "rules") -> list[tuple[re.Pattern, str]]:
    """(file-name pattern, target) for every rule's benchmark record."""
    patterns = []
    for path in sorted(rules_dir.glob("*.smk")):
        target = "core" if path.stem in CORE_FILES else path.stem
        for name in BENCHMARK.findall(path.read_text(encoding="utf-8")):
            # {wildcard} (and f-string {{wildcard}}) matches any part of a file name
            regex = re.sub(r"\\\{+[^}]*\\\}+", "[^/]+", re.escape(name.replace("{{", "{").replace("}}", "}")))
            patterns.append((re.compile(f"^{regex}$"), target))
    if not patterns:
        raise SystemExit(f"no benchmark directives found under {rules_dir}")
    return patterns


def read_record(path: Path) -> dict[str, float]:
    lines = path.read_text(encoding="utf-8").splitlines()
    if len(lines) < 2:
        raise SystemExit(f"{path}: not a Snakemake benchmark record (expected a header and a row)")
    row = dict(zip(lines[0].split("\t"), lines[-1].split("\t"), strict=True))
    to_float = lambda v: float(v) if v not in ("", "NA", "-") else 0.0  # noqa: E731
    return {"wall_s": to_float(row["s"]), "cpu_s": to_float(row.get("cpu_time", "0")),
            "max_rss_mb": to_float(row.get("max_rss", "0")), "end": path.stat().st_mtime}


def job_blocks(log: str) -> dict[str, str]:
    """Snakemake's output split into one block per job (``rule NAME:`` ... ``benchmark: PATH`` ...),
    by the job's benchmark record's file stem."""
    blocks = {}
    for job in re.split(r"\n(?=(?:local)?rule \w+:)", log):
        bench = re.search(r"benchmark: (\S+)", job)
        if bench:
            blocks[Path(bench.group(1)).stem] = job
    return blocks


def declared_memory(log: str) -> dict[str, int]:
    """The ``mem_mb`` each job declared (``resources: ..., mem_mb=N, ...``), by record stem."""
    return {name: int(mem.group(1)) for name, job in job_blocks(log).items()
            if (mem := re.search(r"\bmem_mb=(\d+)", job))}


def output_megabytes(log: str, root: Path) -> dict[str, float]:
    """The size of each job's outputs (``output: a, b``; directories summed) under ``root``, by record stem."""
    def size(path: Path) -> int:
        if path.is_dir():
            return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
        return path.stat().st_size if path.exists() else 0

    sizes = {}
    for name, job in job_blocks(log).items():
        outputs = re.search(r"output: (.+)", job)
        paths = [root / o.strip() for o in outputs.group(1).split(",")] if outputs else []
        sizes[name] = sum(size(p) for p in paths) / 1e6
    return sizes


def summarize(results: Path, patterns=None) -> tuple[dict[str, dict], list[tuple[str, str, dict]], float]:
    patterns = patterns or record_patterns()
    records = sorted((results / "benchmarks").glob("*.tsv"))
    if not records:
        raise SystemExit(f"no benchmark records under {results / 'benchmarks'}: run the workflow first")
    jobs, targets = [], defaultdict(lambda: {"jobs": 0, "wall_s": 0.0, "cpu_s": 0.0, "max_rss_mb": 0.0})
    for path in records:
        name = path.stem
        target = next((t for regex, t in patterns if regex.match(name)), "other")
        record = read_record(path)
        jobs.append((target, name, record))
        entry = targets[target]
        entry["jobs"] += 1
        entry["wall_s"] += record["wall_s"]
        entry["cpu_s"] += record["cpu_s"]
        entry["max_rss_mb"] = max(entry["max_rss_mb"], record["max_rss_mb"])
    span = max(r["end"] for _, _, r in jobs) - min(r["end"] - r["wall_s"] for _, _, r in jobs)
    return dict(targets), jobs, span


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, nargs="?", help="a preset's results directory, e.g. results/small")
    parser.add_argument("--jobs", action="store_true", help="also one row per job")
    parser.add_argument("--log", type=Path, help="Snakemake's output of the run: adds each job's declared mem_mb")
    parser.add_argument("--machine", action="store_true", help="print only the machine (no run needed)")
    args = parser.parse_args(argv)
    for key, value in machine().items():
        print(f"- {key}: {value}")
    print()
    if args.machine:
        return
    if args.results is None:
        parser.error("give a preset's results directory, e.g. results/small (or --machine alone)")
    targets, jobs, span = summarize(args.results)
    log = args.log.read_text(encoding="utf-8") if args.log else ""
    # results/<preset> lies two levels below the directory the workflow ran in
    declared, written = declared_memory(log), output_megabytes(log, args.results.resolve().parents[1])
    total_cpu = sum(t["cpu_s"] for t in targets.values())
    order = ["core", *sorted(t for t in targets if t not in ("core", "other")), *(["other"] if "other" in targets else [])]
    print("| target | jobs | wall s (summed over jobs) | CPU s | share of CPU | largest peak RSS MB |")
    print("|---|---|---|---|---|---|")
    for name in order:
        t = targets[name]
        print(f"| `{name}` | {t['jobs']} | {t['wall_s']:,.0f} | {t['cpu_s']:,.0f} | "
              f"{t['cpu_s'] / max(total_cpu, 1e-9):.0%} | {t['max_rss_mb']:,.0f} |")
    print(f"| all | {len(jobs)} | {sum(t['wall_s'] for t in targets.values()):,.0f} | {total_cpu:,.0f} | 100% | "
          f"{max(t['max_rss_mb'] for t in targets.values()):,.0f} |")
    print(f"\nthe run's span, first job start to last record: {span:,.0f} s ({span / 60:.1f} min)")
    if written:
        print(f"outputs on disk: {sum(written.values()) / 1000:,.1f} GB")
    if declared:
        over = [name for _, name, r in jobs if name in declared and r["max_rss_mb"] > declared[name]]
        print(f"declared mem_mb: {len(declared)} jobs; peak above it: {len(over)} {over if over else ''}; "
              f"largest declaration {max(declared.values()):,} MB")
    if args.jobs:
        print("\n| target | job | wall s | CPU s | peak RSS MB | declared mem_mb | outputs MB |\n|---|---|---|---|---|---|---|")
        for target, name, r in sorted(jobs, key=lambda j: (order.index(j[0]), -j[2]["cpu_s"])):
            mem = f"{declared[name]:,}" if name in declared else "-"
            out = f"{written[name]:,.1f}" if name in written else "-"
            print(f"| `{target}` | `{name}` | {r['wall_s']:,.1f} | {r['cpu_s']:,.1f} | {r['max_rss_mb']:,.0f} | {mem} | "
                  f"{out} |")


if __name__ == "__main__":
    sys.exit(main())
