"""A single-node SLURM cluster on localhost for the tests: munged, slurmctld, slurmd.

Debian's ``slurm-wlm`` and ``munge`` packages, run as root (slurmd launches the jobs),
no accounting database: job states come from ``squeue`` and every finished job is
appended to the controller's job completion log (``jobcomp/filetxt``). State, spool,
logs and the munge socket live in a temporary directory; only ``/etc/slurm/slurm.conf``
is shared with the system, because SLURM's client commands inside a job (``srun``) read
the default path (the executor plugin strips ``SLURM_CONF`` from job steps). It is
written only where no other configuration is there, marked, and removed afterwards.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

SYSTEM_CONF = Path("/etc/slurm/slurm.conf")
MARKER = "# tinylens test cluster: written and removed by tests/slurm_cluster.py"
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "sinfo", "scontrol", "srun")


class Unavailable(Exception):
    """SLURM cannot be started here; the message says why and what would fix it."""


def _binary(name: str) -> str:
    path = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    if path is None:
        raise Unavailable(f"{name} not found: install Debian's slurm-wlm and munge "
                          "(apt-get install slurm-wlm munge; .ci/run does this as root)")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _memory_mb() -> int:
    total_kb = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))
    return int(total_kb / 1024 * 0.8)


@dataclass
class Cluster:
    root: Path
    cpus: int
    jobcomp: Path
    controller_log: Path
    processes: list[subprocess.Popen] = field(default_factory=list)
    lock: object = None

    def job_records(self) -> list[dict[str, str]]:
        """Every job the controller finished, from its job completion log."""
        if not self.jobcomp.exists():
            return []
        return [dict(re.findall(r"(\w+)=(\S*)", line)) for line in self.jobcomp.read_text().splitlines() if line]

    def logs(self) -> str:
        parts = []
        for path in sorted(self.root.glob("log/*.log")):
            parts.append(f"--- {path.name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-15:]))
        return "\n".join(parts)

    def stop(self) -> None:
        subprocess.run([_binary("scancel"), "--quiet", "--partition=main"], capture_output=True, timeout=30)
        for proc in reversed(self.processes):  # slurmd, slurmctld, then munged
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if SYSTEM_CONF.exists() and SYSTEM_CONF.read_text().startswith(MARKER):
            SYSTEM_CONF.unlink()
        if self.lock is not None:
            self.lock.close()


def start(root: Path, timeout: float = 60) -> Cluster:
    """Start the cluster with its files under ``root``; raise :class:`Unavailable` if it cannot."""
    if os.geteuid() != 0:
        raise Unavailable("starting slurmd needs root (it launches jobs as their user)")
    binaries = {name: _binary(name) for name in (*DAEMONS, *CLIENTS, "scancel")}
    if not SYSTEM_CONF.parent.is_dir():
        raise Unavailable(f"{SYSTEM_CONF.parent} is missing: is slurm-wlm installed?")
    # One test cluster per machine at a time (two pytest sessions would share /etc/slurm/slurm.conf).
    lock = open(Path(tempfile.gettempdir()) / "tinylens-slurm-test.lock", "w")
    deadline = time.monotonic() + 600
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                lock.close()
                raise Unavailable("another test session held the SLURM test cluster for 10 minutes") from None
            time.sleep(2)
    if SYSTEM_CONF.exists() and not SYSTEM_CONF.read_text().startswith(MARKER):
        lock.close()
        raise Unavailable(f"{SYSTEM_CONF} belongs to this machine's own SLURM; not replacing it")

    host = socket.gethostname().split(".")[0]
    cpus = os.cpu_count() or 1
    for sub in ("munge", "state", "spool", "log"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "munge").chmod(0o700)
    key = root / "munge/munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    munge_socket = root / "munge/munge.socket"
    cluster = Cluster(root=root, cpus=cpus, jobcomp=root / "log/jobcomp.log",
                      controller_log=root / "log/slurmctld.log", lock=lock)
    SYSTEM_CONF.write_text(f"""{MARKER}
ClusterName=tinylens-test
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={cluster.controller_log}
SlurmdLogFile={root}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc={cluster.jobcomp}
MinJobAge=600
ReturnToService=2
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={_memory_mb()} State=UNKNOWN
PartitionName=main Nodes={host} Default=YES MaxTime=INFINITE State=UP
""")
    try:
        for name, args in (
            ("munged", ["-F", "--force", f"--socket={munge_socket}", f"--key-file={key}",
                        f"--pid-file={root}/munge/munged.pid", f"--log-file={root}/log/munged.log",
                        f"--seed-file={root}/munge/munged.seed"]),
            ("slurmctld", ["-D", "-i"]),
            ("slurmd", ["-D", "-N", host]),
        ):
            out = open(root / f"log/{name}.stdout", "w")
            cluster.processes.append(subprocess.Popen([binaries[name], *args], stdout=out, stderr=subprocess.STDOUT,
                                                      stdin=subprocess.DEVNULL))
            time.sleep(0.5)
        deadline = time.monotonic() + timeout
        while True:
            state = subprocess.run([binaries["sinfo"], "-h", "-o", "%T"], capture_output=True, text=True)
            if state.stdout.strip() == "idle":
                return cluster
            dead = [p.args[0] for p in cluster.processes if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise Unavailable(f"SLURM did not come up ({'exited: ' + ', '.join(dead) if dead else 'timeout'}; "
                                  f"node state {state.stdout.strip() or state.stderr.strip()!r}):\n{cluster.logs()}")
            time.sleep(0.5)
    except BaseException:
        cluster.stop()
        raise


# A slice of the core workflow that keeps the SLURM run near two minutes on 2 cores: the corpus and
# tokenizer (grouped), the strings, two training jobs, their samples (grouped) and a
# two-thread activation dump, so plain, grouped and multi-thread jobs all go through sbatch.
TARGETS = [
    "metrics/corpus.json",
    "samples/seed1337.txt",
    "samples/seed1442.txt",
    "activations/seed1337/prompts_heldout/logits.parquet",
]


@dataclass
class SlurmRun:
    """The workflow's SLURM profile run on a test cluster, in the background (``run``), or the reason it
    could not start (``unavailable``)."""
    unavailable: str | None = None
    cluster: Cluster | None = None
    run: object = None  # conftest.BackgroundRun

    @classmethod
    def start(cls, repo: Path, root: Path, config) -> SlurmRun:
        from conftest import BackgroundRun, snakemake_cmd

        try:
            import snakemake_executor_plugin_slurm  # noqa: F401
        except ImportError:
            return cls(unavailable='snakemake-executor-plugin-slurm not installed (pip install -e ".[slurm]")')
        try:
            cluster = start(root / "cluster")
        except Unavailable as err:
            return cls(unavailable=str(err))
        workdir = root / "run"
        cmd = snakemake_cmd(
            repo, workdir,
            "--profile", str(repo / "profiles/slurm"),
            # The test cluster: no accounting database, so squeue answers for job states; poll
            # often; keep every job's log to show what ran inside it; --cores is its node's CPUs,
            # which caps what a group job asks for.
            "--cores", str(cluster.cpus),
            "--slurm-status-command", "squeue",
            "--slurm-init-seconds-before-status-checks", "2",
            "--slurm-keep-successful-logs",
            *(f"results/test/{t}" for t in TARGETS),
            config=config,
        )
        return cls(cluster=cluster, run=BackgroundRun(cmd, workdir, nice=0))

    def wait(self, timeout: float) -> None:
        self.run.wait(timeout=timeout)

    def stop(self) -> None:
        if self.run is not None:
            self.run.stop()
        if self.cluster is not None:
            self.cluster.stop()
