"""Helpers for the launcher suite (tests/launchers): launching, waiting for Slurm jobs,
reading what tiny_train.py reported."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
TINY = HERE / "tiny_train.py"
VENV_BIN = Path(sys.executable).parent
SLURM_CONF = os.environ.get("NB_SLURM_CONF", "/var/lib/nb-slurm/slurm.conf")
MPIRUN_FLAGS = [
    "--allow-run-as-root", "--oversubscribe",
    "--mca", "oob_tcp_if_include", "lo", "--mca", "btl_tcp_if_include", "lo",
]
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
            "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}

# Launcher variables of the process running pytest must not leak into the jobs.
DROP_PREFIXES = ("SLURM_", "SLURMD_", "TORCHELASTIC_", "OMPI_", "PMIX_", "PMI_", "NB_")
DROP = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
         "GROUP_WORLD_SIZE", "ROLE_RANK", "MASTER_ADDR", "MASTER_PORT"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(cmd, env, timeout=180, cwd=None, check=True) -> subprocess.CompletedProcess:
    """Run ``cmd`` in its own process group; on failure the assertion shows its output.
    On timeout the whole group (the launcher and the workers it started) is killed."""
    cmd = [str(c) for c in cmd]
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(
            f"{cmd} timed out after {timeout}s\n--- stdout\n{out[-6000:]}\n--- stderr\n{err[-6000:]}"
        ) from None
    finally:
        try:  # workers a launcher left behind
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    p = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    if check:
        assert p.returncode == 0, (
            f"{cmd} exited {p.returncode}\n--- stdout\n{out[-6000:]}\n--- stderr\n{err[-6000:]}"
        )
    return p


def slurm_status() -> str | None:
    """None if our cluster answers, else why not."""
    if not shutil.which("scontrol") or not shutil.which("sbatch"):
        return "scontrol/sbatch not installed (scripts/slurm_up.sh installs them)"
    if not os.path.exists(SLURM_CONF):
        return f"{SLURM_CONF} missing: run `bash scripts/slurm_up.sh` (as root) first"
    e = dict(os.environ, SLURM_CONF=SLURM_CONF)
    try:
        p = subprocess.run(["scontrol", "ping"], env=e, capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return "scontrol ping timed out"
    if "is UP" not in p.stdout:
        return f"slurmctld does not answer: {p.stdout.strip()} {p.stderr.strip()}"
    return None


def sbatch(args, env, cwd) -> str:
    """Submit; returns the job id (for an array: the array's job id)."""
    p = run(["sbatch", "--parsable", *args], env, cwd=cwd, timeout=30)
    return p.stdout.strip().split(";")[0]


def job_states(job_id: str, env) -> dict[str, str]:
    """{job id: state} for a job, or for each task of an array."""
    p = subprocess.run(["scontrol", "-o", "show", "job", job_id], env=env,
                       capture_output=True, text=True, timeout=30)
    out = {}
    for line in p.stdout.splitlines():
        jid = re.search(r"\bJobId=(\d+)", line)
        st = re.search(r"\bJobState=(\S+)", line)
        if jid and st:
            out[jid.group(1)] = st.group(1)
    return out


def job_field(job_id: str, field: str, env) -> str | None:
    p = subprocess.run(["scontrol", "-o", "show", "job", job_id], env=env,
                       capture_output=True, text=True, timeout=30)
    m = re.search(rf"\b{field}=(\S*)", p.stdout)
    return m.group(1) if m else None


def wait_job(job_id: str, env, timeout=180, outputs=()) -> dict[str, str]:
    """Wait until the job (every task of an array) has ended; assert it completed."""
    deadline = time.monotonic() + timeout
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        states = job_states(job_id, env)
        if states and all(s in TERMINAL for s in states.values()):
            break
        time.sleep(0.5)
    else:
        subprocess.run(["scancel", job_id], env=env, timeout=30)
        raise AssertionError(f"job {job_id} not done after {timeout}s: {states}\n{_tails(outputs)}")
    bad = {j: s for j, s in states.items() if s != "COMPLETED"}
    assert not bad, f"job {job_id}: {bad}\n{_tails(outputs)}"
    return states


def wait_for(pred, timeout, what, outputs=()):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{_tails(outputs)}")


def _tails(paths) -> str:
    out = []
    for p in paths:
        for f in sorted(Path(p).parent.glob(Path(p).name)) if "*" in str(p) else [Path(p)]:
            if f.exists():
                out.append(f"--- {f}\n{f.read_text(errors='replace')[-4000:]}")
    return "\n".join(out)


def reports(out: Path, attempt: int | None = None) -> list[dict]:
    """The per-rank reports tiny_train.py wrote, sorted by (attempt, rank)."""
    pat = "rank*.a*.json" if attempt is None else f"rank*.a{attempt}.json"
    rs = [json.loads(p.read_text()) for p in Path(out).glob(pat)]
    return sorted(rs, key=lambda r: (r["attempt"], r["rank"]))


def run_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in Path(root).glob("*/*/run.json"))


def assert_agree(rs: list[dict], world: int) -> str:
    """Every rank of one launch got a distinct rank, the same world size and the same
    run folder; returns that folder."""
    assert sorted(r["rank"] for r in rs) == list(range(world)), rs
    assert {r["world_size"] for r in rs} == {world}, rs
    dirs = {r["run_dir"] for r in rs}
    assert len(dirs) == 1 and None not in dirs, f"ranks disagree on the run folder: {dirs}"
    return dirs.pop()


def assert_clean_curve(reader, steps: int) -> None:
    """train/step read back holds each step 0..steps-1 exactly once, in order."""
    df = reader.scalars("train/step")
    assert df["step"].to_list() == list(range(steps)), df
    assert df["value"].to_list() == [float(s) for s in range(steps)]


def tiny(*args) -> list[str]:
    return [sys.executable, str(TINY), *map(str, args)]
