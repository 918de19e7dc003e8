"""The workflow on a real (single-node) SLURM cluster, through profiles/slurm."""

import os
import re
from collections import Counter

import pyarrow.parquet as pq
import pytest
from safetensors.torch import load_file

pytestmark = pytest.mark.workflow

COMPARED = [
    "metrics/corpus.json",
    "strings/strings.parquet",
    "strings/prompts_heldout.parquet",
    "samples/seed1337.txt",
    "samples/seed1442.txt",
    "models/seed1337/model.safetensors",
    "models/seed1442/model.safetensors",
    "models/seed1337/loss.csv",
    *(f"activations/seed1337/prompts_heldout/block{b}.parquet" for b in range(6)),
    "activations/seed1337/prompts_heldout/logits.parquet",
]


def unavailable(reason):
    """Skip where SLURM cannot run, but never in CI: .ci/run installs it."""
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the SLURM test: {reason}")
    pytest.skip(reason)


def same_file(ours, theirs):
    if ours.suffix == ".safetensors":
        a, b = load_file(ours), load_file(theirs)
        return a.keys() == b.keys() and all(bool((a[k] == b[k]).all()) for k in a)
    if ours.suffix == ".parquet":
        return pq.read_table(ours).equals(pq.read_table(theirs))
    if ours.suffix == ".csv":  # loss.csv: everything but the wall-clock column
        def drop_elapsed(path):
            rows = [line.split(",") for line in path.read_text().splitlines()]
            keep = [i for i, name in enumerate(rows[0]) if name != "elapsed_s"]
            return [[row[i] for i in keep] for row in rows]
        return drop_elapsed(ours) == drop_elapsed(theirs)
    return ours.read_bytes() == theirs.read_bytes()


def test_workflow_runs_through_the_slurm_profile(slurm_run, finished_run):
    if slurm_run.unavailable:
        unavailable(slurm_run.unavailable)
    out, cluster, workdir = slurm_run.run.output(), slurm_run.cluster, slurm_run.run.workdir
    assert slurm_run.run.proc.returncode == 0, f"{out[-6000:]}\n{cluster.logs()}"

    # Every job the DAG planned ran inside a SLURM job that went through sbatch.
    table = out.split("Job stats:")[1].split("\n\n")[0]
    planned = Counter({rule: int(n) for rule, n in re.findall(r"^(\w+)\s+(\d+)$", table, flags=re.M)
                       if rule != "total"})
    assert planned["train_model"] == 2 and planned["sample"] == 2, planned
    submitted = {int(i): log for i, log in re.findall(r"has been submitted with SLURM jobid (\d+) \(log: (\S+)\)\.", out)}
    run_id = re.search(r"SLURM run ID: (\S+)", out).group(1)
    records = {int(r["JobId"]): r for r in cluster.job_records() if r.get("Name") == run_id}
    assert set(records) == set(submitted), (sorted(records), sorted(submitted))
    assert all(r["JobState"] == "COMPLETED" for r in records.values()), records
    ran = Counter()
    for log in submitted.values():
        ran.update(re.findall(r"^\s*rule (\w+):", open(log).read(), flags=re.M))
    assert ran == planned, (ran, planned)
    # Small jobs were grouped: fewer sbatch jobs than rule jobs, the samples in one.
    assert len(submitted) < sum(planned.values())
    assert sum("group_samples" in log for log in submitted.values()) == 1
    # Resources came from the rules: the dump's two threads, the training job's memory and time.
    dump = next(r for i, r in records.items() if "dump_activations" in submitted[i])
    dump_log = open(next(log for log in submitted.values() if "dump_activations" in log)).read()
    dump_mem = re.search(r"\bmem_mb=(\d+)", dump_log).group(1)  # sized from the rows of its tables
    assert dump["ProcCnt"] == "2" and f"mem={dump_mem}M" in dump["Tres"], (dump_mem, dump)
    train = [r for i, r in records.items() if "train_model" in submitted[i]]
    assert len(train) == 2 and all(r["TimeLimit"] == "10" and "mem=1000M" in r["Tres"] for r in train), train

    # The results equal the local run's.
    for path in COMPARED:
        assert same_file(workdir / "results/test" / path, finished_run / path), path
    print(f"SLURM run: {slurm_run.run.wall:.0f} s wall, {len(submitted)} sbatch jobs for {sum(planned.values())} rule jobs")
