"""Start real Python processes with the environment a launcher gives its workers.

The ``*_env`` functions return exactly the variables torchrun, ``srun`` and Open MPI's
``mpirun`` set for one worker, as measured in shared/launchers/README.md; ``base_env``
is the surrounding environment with every launcher and ``NB_*`` variable of the
process running pytest removed, so nothing leaks in.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RANK_SCRIPT = Path(__file__).resolve().parent / "_scripts" / "rank.py"
HANG_GUARD_S = 60  # a process still running after this is a hang: never a measurement

_DROP_PREFIXES = ("SLURM_", "SLURMD_", "TORCHELASTIC_", "OMPI_", "PMIX_", "PMI_", "NB_", "ROLE_", "GROUP_")
_DROP = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
         "TORCH_NCCL_ASYNC_ERROR_HANDLING", "HFI_NO_BACKTRACE", "IPATH_NO_BACKTRACE"}


def base_env(**extra: str) -> dict[str, str]:
    """This environment without launcher or nb variables, nblog importable, provenance
    off (``NB_PROVENANCE=0``; pass ``NB_PROVENANCE="1"`` to record it), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not (k.startswith(_DROP_PREFIXES) or k in _DROP)}
    env["PYTHONPATH"] = str(REPO)
    env["NB_PROVENANCE"] = "0"  # as system metrics are off: tested on its own (test_provenance)
    env.update(extra)
    return env


def torchrun_env(rank: int, world: int, *, nproc_per_node: int | None = None,
                 run_id: str | None = None, restart: int = 0) -> dict[str, str]:
    """The 19 variables a torchrun (torch 2.13) worker gets.

    ``run_id`` is ``TORCHELASTIC_RUN_ID``: the ``--rdzv-id`` given with c10d, the
    literal ``none`` (static rendezvous), or by default a uuid4 (plain launches).
    """
    per_node = world if nproc_per_node is None else nproc_per_node
    node = rank // per_node
    rid = str(uuid.uuid4()) if run_id is None else run_id
    return {
        "RANK": str(rank),
        "LOCAL_RANK": str(rank % per_node),
        "WORLD_SIZE": str(world),
        "LOCAL_WORLD_SIZE": str(per_node),
        "GROUP_RANK": str(node),
        "GROUP_WORLD_SIZE": str(world // per_node),
        "ROLE_RANK": str(rank),
        "ROLE_WORLD_SIZE": str(world),
        "ROLE_NAME": "default",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "29500",
        "TORCHELASTIC_RUN_ID": rid,
        "TORCHELASTIC_RESTART_COUNT": str(restart),
        "TORCHELASTIC_MAX_RESTARTS": "0",
        "TORCHELASTIC_ERROR_FILE": f"/tmp/torchelastic_x/{rid}_y/attempt_{restart}/{rank}/error.json",
        "TORCHELASTIC_USE_AGENT_STORE": "True",
        "TORCHELASTIC_SIGNALS_TO_HANDLE": "SIGTERM,SIGINT,SIGHUP,SIGQUIT",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
        "OMP_NUM_THREADS": "1",
    }


def srun_env(procid: int, tasks_per_node: list[int], *, job_id: str,
             restart: int | None = None, step_id: int = 0) -> dict[str, str]:
    """The variables of one ``srun`` task; ``tasks_per_node`` lays tasks out on nodes."""
    ntasks, nnodes = sum(tasks_per_node), len(tasks_per_node)
    node, first = 0, 0
    while procid >= first + tasks_per_node[node]:
        first += tasks_per_node[node]
        node += 1
    nodelist = "node1" if nnodes == 1 else f"node[1-{nnodes}]"
    env = {
        "SLURM_PROCID": str(procid),
        "SLURM_LOCALID": str(procid - first),
        "SLURM_NTASKS": str(ntasks),
        "SLURM_NPROCS": str(ntasks),
        "SLURM_NODEID": str(node),
        "SLURM_NNODES": str(nnodes),
        "SLURM_JOB_NUM_NODES": str(nnodes),
        "SLURMD_NODENAME": f"node{node + 1}",
        "SLURM_JOB_ID": job_id,
        "SLURM_JOBID": job_id,
        "SLURM_STEP_ID": str(step_id),
        "SLURM_STEPID": str(step_id),
        "SLURM_JOB_NODELIST": nodelist,
        "SLURM_STEP_NODELIST": nodelist,
        "SLURM_NODELIST": nodelist,
        "SLURM_TASKS_PER_NODE": ",".join(map(str, tasks_per_node)),
        "SLURM_STEP_TASKS_PER_NODE": ",".join(map(str, tasks_per_node)),
        "SLURM_GTIDS": ",".join(str(first + i) for i in range(tasks_per_node[node])),
        "SLURM_STEP_NUM_NODES": str(nnodes),
        "SLURM_STEP_NUM_TASKS": str(ntasks),
        "SLURM_JOB_NAME": "job.sh",
        "SLURM_JOB_PARTITION": "debug",
        "SLURM_CLUSTER_NAME": "cluster",
        "SLURM_SUBMIT_DIR": "/root",
        "SLURM_CPUS_ON_NODE": "8",
        "SLURM_TASK_PID": str(1000 + procid),
    }
    if restart:
        env["SLURM_RESTART_COUNT"] = str(restart)
    return env


def sbatch_script_env(ntasks: int, *, job_id: str) -> dict[str, str]:
    """What the batch script itself (and so ``mpirun``/``torchrun`` started from it) sees."""
    return {
        "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NODEID": "0",
        "SLURM_NTASKS": str(ntasks), "SLURM_NPROCS": str(ntasks), "SLURM_NNODES": "1",
        "SLURM_JOB_NUM_NODES": "1", "SLURM_JOB_ID": job_id, "SLURM_JOBID": job_id,
        "SLURM_JOB_NODELIST": "node1", "SLURM_NODELIST": "node1", "SLURMD_NODENAME": "node1",
        "SLURM_TASKS_PER_NODE": str(ntasks), "SLURM_JOB_NAME": "job.sh", "SLURM_CPUS_ON_NODE": "8",
    }


def mpirun_env(rank: int, size: int, *, per_node: int | None = None) -> dict[str, str]:
    """The rank-defining variables of an Open MPI 4.1 process (and a few of the rest)."""
    per_node = size if per_node is None else per_node
    local = rank % per_node
    return {
        "OMPI_COMM_WORLD_RANK": str(rank),
        "OMPI_COMM_WORLD_SIZE": str(size),
        "OMPI_COMM_WORLD_LOCAL_RANK": str(local),
        "OMPI_COMM_WORLD_LOCAL_SIZE": str(per_node),
        "OMPI_COMM_WORLD_NODE_RANK": str(local),
        "OMPI_UNIVERSE_SIZE": str(size),
        "OMPI_FIRST_RANKS": "0",
        "OMPI_NUM_APP_CTX": "1",
        "OMPI_APP_CTX_NUM_PROCS": str(size),
        "OMPI_MCA_ess": "^singleton",
        "OMPI_MCA_orte_launch": "1",
        "OMPI_COMMAND": "python",
        "PMIX_RANK": str(rank),
        "PMIX_NAMESPACE": "prterun-host-1234@1",
        "HFI_NO_BACKTRACE": "1",
        "IPATH_NO_BACKTRACE": "1",
    }


def start_rank(spec: dict, env: dict[str, str], cwd: Path) -> subprocess.Popen:
    """Start ``_scripts/rank.py`` with ``spec`` (see that script) in environment ``env``."""
    return subprocess.Popen(
        [sys.executable, str(RANK_SCRIPT), json.dumps(spec)],
        env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def start_code(code: str, env: dict[str, str], cwd: Path) -> subprocess.Popen:
    """Start ``python -c code``."""
    return subprocess.Popen(
        [sys.executable, "-c", code],
        env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


class Done:
    """A finished process: ``rc``, ``out``, ``err`` and the ``RESULT`` it printed (or None)."""

    def __init__(self, rc: int, out: str, err: str):
        self.rc, self.out, self.err = rc, out, err
        lines = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
        self.result = json.loads(lines[-1][7:]) if lines else None

    def __repr__(self) -> str:
        return f"<rc={self.rc}\n--- stdout\n{self.out[-3000:]}\n--- stderr\n{self.err[-3000:]}>"


def wait(proc: subprocess.Popen, *, expect_rc: int | None = 0) -> Done:
    """Wait for ``proc`` (killing it if it hangs) and check its exit status."""
    try:
        out, err = proc.communicate(timeout=HANG_GUARD_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"process hung; stdout:\n{out}\nstderr:\n{err}") from None
    done = Done(proc.returncode, out, err)
    if expect_rc is not None:
        assert done.rc == expect_rc, done
    return done


def run_ranks(specs_envs: list[tuple[dict, dict[str, str]]], cwd: Path) -> list[Done]:
    """Start every (spec, env) at once, as a launcher does, and wait for all of them."""
    procs = [start_rank(spec, env, cwd) for spec, env in specs_envs]
    return [wait(p) for p in procs]


def read_line(proc: subprocess.Popen) -> str:
    """The next line of ``proc``'s stdout ("" at its end)."""
    return proc.stdout.readline().strip()
