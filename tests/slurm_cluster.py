"""A one-node SLURM cluster on this machine for tests: munged, slurmctld and slurmd started from
Debian's slurm-wlm and munge with a config and state under a temp directory, stopped by PID."""
from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

from tests.conftest import free_port

DAEMONS = ("munged", "slurmctld", "slurmd")


def slurm_available() -> bool:
    return all(shutil.which(d) or Path(f"/usr/sbin/{d}").exists() for d in DAEMONS) and shutil.which("sbatch")


def _daemon(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


CONF = """ClusterName=hallutest
SlurmctldHost={host}(127.0.0.1)
SlurmUser={user}
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={root}/munge.sock
CredType=cred/munge
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
PlugStackConfig={root}/plugstack.conf
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
JobRequeue=1
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={mem} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


class LocalSlurm:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.procs: dict[str, subprocess.Popen] = {}
        self.env = {**os.environ, "SLURM_CONF": str(self.root / "slurm.conf")}

    def _spawn(self, name: str, args: list[str]) -> None:
        log = open(self.root / f"{name}.out", "w")
        self.procs[name] = subprocess.Popen([_daemon(name), *args], stdout=log, stderr=subprocess.STDOUT,
                                            env=self.env, start_new_session=True)

    def _wait(self, what: str, ready, timeout: float = 60) -> None:
        end = time.time() + timeout
        while time.time() < end:
            if ready():
                return
            dead = [n for n, p in self.procs.items() if p.poll() is not None]
            if dead:
                raise RuntimeError(f"{dead} exited while waiting for {what}: " + self.logs())
            time.sleep(0.3)
        raise TimeoutError(f"timed out waiting for {what}: " + self.logs())

    def start(self) -> LocalSlurm:
        r = self.root
        r.chmod(0o755)
        for d in ("state", "spool"):
            (r / d).mkdir(parents=True, exist_ok=True)
        (r / "plugstack.conf").write_text("")
        key = r / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self._spawn("munged", ["-F", "--force", f"--socket={r}/munge.sock", f"--key-file={key}",
                               f"--pid-file={r}/munged.pid", f"--seed-file={r}/munge.seed"])
        self._wait("munged", lambda: (r / "munge.sock").exists())
        mem = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 20 * 0.8)
        (r / "slurm.conf").write_text(CONF.format(
            host=socket.gethostname().split(".")[0], user=os.environ.get("USER", "root"), root=r,
            ctld_port=free_port(), slurmd_port=free_port(), cpus=os.cpu_count(), mem=mem))
        self._spawn("slurmctld", ["-D", "-i", "-f", str(r / "slurm.conf")])
        self._spawn("slurmd", ["-D", "-f", str(r / "slurm.conf")])
        self._wait("an idle node", lambda: "idle" in self.run("sinfo", "-h", "-o", "%T", check=False))
        return self

    def run(self, *cmd: str, check: bool = True) -> str:
        done = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=60)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: {done.stderr}")
        return done.stdout

    def job_state(self, job_id: str) -> str:
        found = re.search(r"JobState=(\w+)", self.run("scontrol", "show", "job", job_id))
        return found.group(1) if found else "UNKNOWN"

    def wait_job(self, job_id: str, timeout: float = 600, release_requeued: bool = True) -> str:
        """Wait until the job ends; a requeued job is released at once (SLURM holds it ~2 minutes)."""
        end = time.time() + timeout
        while time.time() < end:
            show = self.run("scontrol", "show", "job", job_id)
            state = re.search(r"JobState=(\w+)", show).group(1)
            if state in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"):
                return state
            if release_requeued and state == "PENDING" and "Reason=BeginTime" in show:
                self.run("scontrol", "update", f"JobId={job_id}", "StartTime=now", check=False)
            time.sleep(1)
        raise TimeoutError(f"job {job_id} still running after {timeout}s: " + self.logs())

    def logs(self) -> str:
        return "".join(f"\n--- {p.name}\n{p.read_text()[-2000:]}" for p in sorted(self.root.glob("*.out")) +
                       sorted(self.root.glob("*.log")))

    def stop(self) -> None:
        for name in reversed(DAEMONS):
            proc = self.procs.get(name)
            if proc is None or proc.poll() is not None:
                continue
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
