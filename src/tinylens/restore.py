"""After `dvc pull`: bring Snakemake in line with the pulled artifacts, or refuse and change nothing.

A fresh clone has no `.snakemake` metadata and `dvc pull` scrambles file
times, so Snakemake would rerun everything. The restore:

1. `dvc status workflow@<preset>` must be clean: every versioned artifact is
   present and matches `dvc.lock`, and no workflow code or config changed
   since it was produced. Otherwise it says what is stale or missing and
   stops before touching anything.
2. `snakemake --touch` marks the pulled outputs up to date, in DAG order.
3. `snakemake -n` must then plan no training, dumping or search job.

    tinylens-restore --preset small
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

#: Jobs a restore must make unnecessary: they train, dump or search.
HEAVY_RULES = ("train_model", "dump_activations", "search_shard",
               # superposition family: the toy-model sweeps
               "superposition_uniform", "superposition_nonuniform", "superposition_dimensionality",
               "superposition_phase_diagram")


class RestoreError(RuntimeError):
    pass


def _run(cmd: Sequence[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True)


def dvc_status(preset: str, cwd: Path) -> dict:
    """`dvc status` of the preset's stage as JSON: {} when the workspace matches dvc.lock."""
    if shutil.which("dvc") is None:
        raise RestoreError("dvc is not installed; pip install -e . installs it")
    proc = _run(["dvc", "status", f"workflow@{preset}", "--json"], cwd)
    if proc.returncode != 0:
        raise RestoreError(f"`dvc status workflow@{preset}` failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return json.loads(proc.stdout or "{}")


def describe_status(status: dict) -> str:
    lines = []
    for stage, changes in status.items():
        for change in changes:
            if isinstance(change, dict):
                for kind, paths in change.items():
                    items = paths.items() if isinstance(paths, dict) else [(paths, "")]
                    lines += [f"{stage}: {kind} {path} {state}".rstrip() for path, state in items]
            else:
                lines.append(f"{stage}: {change}")
    return "\n  ".join(lines)


def snakemake_cmd(preset: str, *args: str, extra_config: Sequence[str] = ()) -> list[str]:
    return [sys.executable, "-m", "snakemake", "--cores", "1", *args, "--config", f"preset={preset}", *extra_config]


def planned_jobs(preset: str, cwd: Path, extra_config: Sequence[str] = ()) -> dict[str, int]:
    """Jobs `snakemake -n` would run, by rule ({} when there is nothing to do)."""
    proc = _run(snakemake_cmd(preset, "-n", extra_config=extra_config), cwd)
    out = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise RestoreError(f"`snakemake -n` failed:\n{out[-3000:]}")
    if "Job stats:" not in out:
        return {}
    table = out.split("Job stats:", 1)[1].split("\n\n", 1)[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, flags=re.M)
            if m.group(1) not in ("total", "job")}


def restore(preset: str, cwd: str | Path = ".", extra_config: Sequence[str] = ()) -> dict[str, int]:
    """Check, touch, verify; returns the jobs still planned (only light ones, such as figures)."""
    cwd = Path(cwd)
    status = dvc_status(preset, cwd)
    if status:
        raise RestoreError(
            f"the artifacts of preset '{preset}' are not those dvc.lock records, so nothing was changed:\n  "
            f"{describe_status(status)}\nRun `dvc pull workflow@{preset}` for missing or modified artifacts; "
            "if workflow code or config changed since they were pushed, they are stale: check out the commit "
            "they belong to, or rerun the workflow (`dvc repro workflow@" + preset + "`)."
        )
    proc = _run(snakemake_cmd(preset, "--touch", extra_config=extra_config), cwd)
    if proc.returncode != 0:
        raise RestoreError(f"`snakemake --touch` failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
    jobs = planned_jobs(preset, cwd, extra_config)
    heavy = {rule: n for rule, n in jobs.items() if rule in HEAVY_RULES}
    if heavy:
        raise RestoreError(f"after the restore Snakemake still plans {heavy}; the pulled artifacts are incomplete")
    return jobs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tinylens-restore", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="small", help="the preset whose artifacts were pulled (default: small)")
    parser.add_argument("--config", nargs="*", default=[], metavar="KEY=VALUE",
                        help="extra Snakemake --config values, e.g. corpus_url=/path/to/input.txt")
    args = parser.parse_args(argv)
    try:
        jobs = restore(args.preset, Path.cwd(), args.config)
    except RestoreError as err:
        print(f"tinylens-restore: {err}", file=sys.stderr)
        return 1
    rest = ", ".join(f"{rule} x{n}" for rule, n in jobs.items() if rule != "all") or "nothing"
    print(f"restored preset '{args.preset}': Snakemake now plans {rest} (no training, dumping or search)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
