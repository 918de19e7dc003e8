"""Restore pulled artifacts (users) and publish finished ones (maintainers), failing closed.

**Restore**, after ``dvc pull workflow@<preset>``: a fresh clone has no
``.snakemake`` metadata and ``dvc pull`` scrambles file times, so Snakemake
would rerun everything. ``tinylens restore``:

1. checks that ``dvc.lock`` records artifacts of the preset at all;
2. ``dvc status workflow@<preset>`` must be clean: every versioned artifact is
   present and matches ``dvc.lock``, and no workflow code or config changed
   since it was produced;
3. Snakemake's plan (``snakemake --summary``, one tab-separated line per
   output file of the workflow) must show every output file present: a set
   recorded while incomplete (a shard deleted before ``dvc commit``) is
   refused, naming what is missing;
4. only then ``snakemake --touch`` marks the outputs up to date, in DAG order;
5. the plan must then hold no pending job at all.

Steps 1-3 change nothing; any output of Snakemake the restore cannot read is
an error, never "nothing to do".

**Publish** (``tinylens publish``, :mod:`tinylens.publish`), after a finished run: the plan must show
every output present and up to date; then ``dvc commit``, ``dvc push`` and a
git commit of ``dvc.lock`` with the outputs DVC leaves to git (:func:`git_outputs`: the run's
headline, which ``dvc metrics diff`` compares a later run against).

Only ``--config`` keys that cannot change any result are passed on:
:data:`SAFE_CONFIG_KEYS`.

    tinylens restore --preset small
    tinylens publish --preset small
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

#: ``--config`` keys a restore or publish may set: the corpus' location (its sha256, not the
#: URL, defines the content, and the download is never rerun on restored artifacts).
SAFE_CONFIG_KEYS = ("corpus_url",)

#: The header of ``snakemake --summary``; any other output is not understood and is an error.
SUMMARY_HEADER = ["output_file", "date", "rule", "log-file(s)", "status", "plan"]


class RestoreError(RuntimeError):
    pass


def _run(cmd: Sequence[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True)


def check_config(extra_config: Sequence[str]) -> list[str]:
    """Only ``KEY=VALUE`` items whose key is in :data:`SAFE_CONFIG_KEYS`."""
    bad = []
    for item in extra_config:
        key, sep, _ = item.partition("=")
        if not sep or key not in SAFE_CONFIG_KEYS:
            bad.append(item)
    if bad:
        raise RestoreError(
            f"--config {' '.join(bad)}: only {', '.join(SAFE_CONFIG_KEYS)} may be set here (KEY=VALUE), since any "
            "other key can change results and the artifacts would then not be what the configuration says. "
            "To use another configuration, edit config/config.yaml, run the workflow and publish its artifacts.")
    return list(extra_config)


#: dvc.yaml's stage that runs the workflow, one per preset (``foreach``).
STAGE = "workflow"


def stage(preset: str) -> str:
    return f"{STAGE}@{preset}"


def check_lock(preset: str, cwd: Path) -> None:
    """dvc.lock must record the preset's stage, or there is nothing a pull could have fetched."""
    lock = cwd / "dvc.lock"
    stages = {}
    if lock.exists():
        stages = (yaml.safe_load(lock.read_text(encoding="utf-8")) or {}).get("stages", {})
    if stage(preset) not in stages:
        raise RestoreError(
            ("this checkout has no dvc.lock" if not lock.exists() else f"this checkout's dvc.lock has no entry for "
             f"{stage(preset)}") + f": no artifacts of preset '{preset}' were published with this commit, so `dvc pull` "
            f"has nothing to fetch and nothing was changed. Check out a commit whose dvc.lock records them "
            f"(`git log -- dvc.lock`), ask a maintainer to publish them (`tinylens publish --preset {preset}`), "
            f"or compute them: snakemake --cores all --config preset={preset}")


def dvc_status(preset: str, cwd: Path) -> dict:
    """`dvc status` of the preset's stage as JSON: {} when the workspace matches dvc.lock."""
    import json

    if shutil.which("dvc") is None:
        raise RestoreError("dvc is not installed; pip install -e . installs it")
    proc = _run(["dvc", "status", stage(preset), "--json"], cwd)
    if proc.returncode != 0:
        raise RestoreError(f"`dvc status {stage(preset)}` failed: {proc.stderr.strip() or proc.stdout.strip()}")
    try:
        return json.loads(proc.stdout or "{}")
    except json.JSONDecodeError:
        raise RestoreError(f"`dvc status {stage(preset)} --json` printed no JSON:\n{proc.stdout[-2000:]}") from None


def describe_status(status: dict) -> str:
    lines = []
    for name, changes in status.items():
        for change in changes:
            if isinstance(change, dict):
                for kind, paths in change.items():
                    items = paths.items() if isinstance(paths, dict) else [(paths, "")]
                    lines += [f"{name}: {kind} {path} {state}".rstrip() for path, state in items]
            else:
                lines.append(f"{name}: {change}")
    return "\n  ".join(lines)


def snakemake_cmd(preset: str, *args: str, extra_config: Sequence[str] = ()) -> list[str]:
    return [sys.executable, "-m", "snakemake", "--cores", "1", *args, "--config", f"preset={preset}", *extra_config]


@dataclass(frozen=True)
class PlannedOutput:
    path: str
    rule: str
    status: str  # "ok", "missing", "updated input files", ...
    pending: bool  # Snakemake would (re)run the job that writes it


def parse_summary(text: str) -> list[PlannedOutput]:
    """The rows of ``snakemake --summary``; anything else is an error (fail closed)."""
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.split("\t") == SUMMARY_HEADER)
    except StopIteration:
        raise RestoreError("could not read Snakemake's plan: `snakemake --summary` printed no table with the "
                           f"columns {SUMMARY_HEADER}:\n{text[-2000:]}") from None
    rows = []
    for line in lines[start + 1 :]:
        if not line.strip():
            continue
        cells = line.split("\t")
        if len(cells) != len(SUMMARY_HEADER) or cells[5] not in ("update pending", "no update"):
            raise RestoreError(f"could not read Snakemake's plan: unexpected line in `snakemake --summary`: {line!r}")
        rows.append(PlannedOutput(cells[0], cells[2], cells[4], cells[5] == "update pending"))
    return rows


def plan(preset: str, cwd: Path, extra_config: Sequence[str] = ()) -> list[PlannedOutput]:
    """Every output file of the workflow's DAG, with whether it exists and whether its job would run."""
    proc = _run(snakemake_cmd(preset, "--summary", extra_config=extra_config), cwd)
    if proc.returncode != 0:
        raise RestoreError(f"`snakemake --summary` failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
    return parse_summary(proc.stdout)


def _listing(outputs: Sequence[PlannedOutput], limit: int = 20) -> str:
    shown = "\n  ".join(f"{o.path} ({o.rule}: {o.status})" for o in outputs[:limit])
    return shown + (f"\n  ... ({len(outputs)} in all)" if len(outputs) > limit else "")


def pending_jobs(outputs: Sequence[PlannedOutput]) -> dict[str, int]:
    """Planned jobs by rule (one per distinct rule and output group, counted by output files)."""
    jobs: dict[str, int] = {}
    for o in outputs:
        if o.pending:
            jobs[o.rule] = jobs.get(o.rule, 0) + 1
    return jobs


def restore(preset: str, cwd: str | Path = ".", extra_config: Sequence[str] = ()) -> list[PlannedOutput]:
    """Check, touch, verify; returns the plan after the restore (nothing pending)."""
    cwd = Path(cwd)
    extra_config = check_config(extra_config)
    check_lock(preset, cwd)
    status = dvc_status(preset, cwd)
    if status:
        raise RestoreError(
            f"the artifacts of preset '{preset}' are not those dvc.lock records, so nothing was changed:\n  "
            f"{describe_status(status)}\nRun `dvc pull {stage(preset)}` for missing or modified artifacts; "
            "if workflow code or config changed since they were pushed, they are stale: check out the commit "
            f"they belong to, or rerun the workflow (snakemake --cores all --config preset={preset})."
        )
    missing = [o for o in plan(preset, cwd, extra_config) if o.status == "missing"]
    if missing:
        raise RestoreError(
            f"dvc.lock records an incomplete set of artifacts for preset '{preset}' (they were published before "
            f"the run was complete), so nothing was changed. Missing:\n  {_listing(missing)}\n"
            f"Rerun the missing steps (snakemake --cores all --config preset={preset}); a maintainer then "
            f"republishes with `tinylens publish --preset {preset}`.")
    proc = _run(snakemake_cmd(preset, "--touch", extra_config=extra_config), cwd)
    if proc.returncode != 0:
        raise RestoreError(f"`snakemake --touch` failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
    after = plan(preset, cwd, extra_config)
    pending = [o for o in after if o.pending]
    if pending:
        raise RestoreError(f"after the restore Snakemake still plans jobs for:\n  {_listing(pending)}\n"
                           "The pulled artifacts do not match this checkout's workflow; please report this.")
    return after


def git_outputs(preset: str, cwd: str | Path = ".") -> list[str]:
    """The preset's stage outputs that dvc.yaml marks ``cache: false``: DVC records their hashes in dvc.lock
    but neither caches nor pushes them, so git carries them (a clone has them without a pull)."""
    path = Path(cwd) / "dvc.yaml"
    dvc_yaml = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else {}
    outs = (dvc_yaml or {}).get("stages", {}).get(STAGE, {}).get("do", {}).get("outs", [])
    return [path.replace("${item}", preset) for out in outs if isinstance(out, dict)
            for path, options in out.items() if (options or {}).get("cache") is False]


def publish(preset: str, cwd: str | Path = ".", extra_config: Sequence[str] = (), push: bool = True,
            message: str | None = None) -> str:
    """Record a finished run in dvc.lock, push its artifacts and commit dvc.lock; returns what was done."""
    cwd = Path(cwd)
    extra_config = check_config(extra_config)
    outputs = plan(preset, cwd, extra_config)
    if not outputs:
        raise RestoreError(f"Snakemake's plan for preset '{preset}' lists no output files; nothing to publish")
    unfinished = [o for o in outputs if o.status == "missing" or o.pending]
    if unfinished:
        raise RestoreError(
            f"the run of preset '{preset}' is not complete and up to date, so nothing was published:\n  "
            f"{_listing(unfinished)}\nFinish it first: snakemake --cores all --config preset={preset}")
    for cmd in (["dvc", "commit", "--force", stage(preset)], *([["dvc", "push", stage(preset)]] if push else [])):
        proc = _run(cmd, cwd)
        if proc.returncode != 0:
            raise RestoreError(f"`{' '.join(cmd)}` failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
    committed = ["dvc.lock", *git_outputs(preset, cwd)]
    proc = _run(["git", "add", "--", *committed], cwd)
    if proc.returncode != 0:
        raise RestoreError(f"`git add {' '.join(committed)}` failed: {proc.stderr.strip()}")
    if _run(["git", "diff", "--cached", "--quiet", "--", *committed], cwd).returncode == 0:
        return f"dvc.lock already recorded these artifacts of preset '{preset}'" + ("; pushed" if push else "")
    proc = _run(["git", "commit", "-m", message or f"Artifacts of the {preset} preset", "--", *committed], cwd)
    if proc.returncode != 0:
        raise RestoreError(f"`git commit {' '.join(committed)}` failed: {(proc.stdout + proc.stderr).strip()}")
    return f"published preset '{preset}': dvc.lock committed" + (", artifacts pushed" if push else "")


def run(args: argparse.Namespace) -> int:
    """``tinylens restore`` (its arguments: :mod:`tinylens.cli`); exit status 1 when a check fails."""
    try:
        restore(args.preset, Path.cwd(), args.config)
    except RestoreError as err:
        print(f"tinylens restore: {err}", file=sys.stderr)
        return 1
    print(f"restored preset '{args.preset}': Snakemake now plans nothing (no training, dumping or search)")
    return 0


if __name__ == "__main__":
    from tinylens.wording import moved

    sys.exit(moved("python -m tinylens.restore", "restore"))
