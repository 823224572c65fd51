"""torchrun kept to this machine: ``scripts/loopback.sh`` runs it in a network namespace
whose only interface is loopback, so nothing it listens on is reachable from elsewhere.

torch 2.13's stores listen on every interface (``*:<port>``) whatever address torchrun is
given: the control test shows it, so the wrapper (used by scripts/quickstart.sh and the
tests that start torchrun) is what keeps the promise. Measured with ``ss -ltnp`` while the
job waits, after every rank has joined the gloo process group.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LOOPBACK = ["env", "NB_LOOPBACK=require", "bash", str(REPO / "scripts" / "loopback.sh")]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
pytestmark = pytest.mark.skipif(shutil.which("ss") is None or shutil.which("nsenter") is None,
                                reason="needs ss and nsenter (iproute2, util-linux)")

WORKER = """
import os, sys, time
from pathlib import Path
import torch.distributed as dist
dist.init_process_group("gloo")
dist.barrier()
out = Path(sys.argv[1])
(out / f"ready.{os.environ['RANK']}").write_text(str(os.getpid()))
while not (out / "go").exists():
    time.sleep(0.05)
dist.barrier()
dist.destroy_process_group()
"""


def listeners(pids: set[int], netns_of: int | None = None) -> list[str]:
    """``ADDRESS:PORT`` of the TCP sockets that ``pids`` listen on, as ``ss -ltnp`` shows them
    in this network namespace (or in the one of process ``netns_of``)."""
    cmd = ["ss", "-ltnpH"] if netns_of is None else ["nsenter", "-t", str(netns_of), "-n", "ss", "-ltnpH"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=30).stdout
    return sorted(line.split()[3] for line in out.splitlines()
                  if any(f"pid={p}," in line for p in pids))


def group(pgid: int) -> set[int]:
    out = subprocess.run(["ps", "-o", "pid=", "-g", str(pgid)], capture_output=True, text=True).stdout
    return {int(p) for p in out.split()}


def listening_while_running(tmp_path: Path, prefix: list[str]) -> tuple[list[str], list[str]]:
    """Start a 2-rank torchrun job (prefixed by ``prefix``), wait until both ranks are in the
    process group, and return (listeners seen here, listeners seen inside the job's namespace)."""
    (tmp_path / "w.py").write_text(WORKER)
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
           and not k.startswith(("TORCHELASTIC_", "SLURM_", "OMPI_"))}
    proc = subprocess.Popen([*prefix, *TORCHRUN, "--standalone", "--nproc-per-node", "2", str(tmp_path / "w.py"),
                             str(tmp_path)], env={**env, "OMP_NUM_THREADS": "1"}, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while len(list(tmp_path.glob("ready.*"))) < 2:
            assert proc.poll() is None, f"torchrun exited {proc.returncode}: {proc.stdout.read()}"
            assert time.monotonic() < deadline, "the ranks did not join in 120 s"
            time.sleep(0.1)
        pids = group(proc.pid)
        here = listeners(pids)
        inside = listeners(pids, netns_of=proc.pid)
        (tmp_path / "go").write_text("")
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, out
        return here, inside
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()


def test_torchrun_listens_on_every_interface_by_itself(tmp_path):
    """The control: torchrun's own store listens on the wildcard address (``*:<port>``)."""
    here, _ = listening_while_running(tmp_path, [])
    assert any(a.startswith(("*:", "0.0.0.0:", "[::]:")) for a in here), here


def test_under_loopback_sh_nothing_listens_beyond_this_machine(tmp_path):
    here, inside = listening_while_running(tmp_path, LOOPBACK)
    assert here == [], f"reachable from the machine's network: {here}"
    assert inside, "the job's own namespace shows no listener: the probe saw nothing"
    interfaces = subprocess.run(LOOPBACK + ["ip", "-o", "link", "show", "up"], capture_output=True,
                                text=True, check=True, timeout=30).stdout
    assert [line.split(":")[1].strip() for line in interfaces.splitlines()] == ["lo"]
