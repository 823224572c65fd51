"""Shared pieces of the hardening suite: clean environments, launcher variables,
report pipes from child processes, small filesystems mounted by the test.

``FULL`` (``NB_HARDENING_FULL=1``) switches the heavy variants on: 200 kills instead
of 30, longer fuzzing, a longer soak. The default run stays a few minutes on 2 cores.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
FULL = os.environ.get("NB_HARDENING_FULL", "") not in ("", "0")

_DROP_PREFIXES = ("SLURM_", "SLURMD_", "TORCHELASTIC_", "OMPI_", "PMIX_", "PMI_", "NB_", "ROLE_", "GROUP_",
                  "FORCE_COLOR", "NO_COLOR")
_DROP = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without launcher, ``NB_*`` or colour variables, nblog importable."""
    env = {k: v for k, v in os.environ.items() if not (k.startswith(_DROP_PREFIXES) or k in _DROP)}
    env["PYTHONPATH"] = str(REPO)
    env["OMP_NUM_THREADS"] = "1"
    env.update({k: str(v) for k, v in extra.items()})
    return env


def torchrun_env(rank: int, world: int, *, local_world: int | None = None, **extra: str) -> dict[str, str]:
    """The rank variables torchrun gives a worker (one machine of ``local_world`` ranks)."""
    per_node = world if local_world is None else local_world
    variables = {
        "RANK": str(rank), "LOCAL_RANK": str(rank % per_node), "WORLD_SIZE": str(world),
        "LOCAL_WORLD_SIZE": str(per_node), "GROUP_RANK": str(rank // per_node), "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "29500", "TORCHELASTIC_RESTART_COUNT": "0",
    }
    return clean_env(**{**variables, **extra})


class Reports:
    """The read end of a pipe a child writes report lines to (its fd is in ``HK_FD``)."""

    def __init__(self) -> None:
        self.rfd, self.wfd = os.pipe()
        os.set_blocking(self.rfd, False)
        self.buf = b""
        self.lines: list[str] = []

    def env(self) -> dict[str, str]:
        return {"HK_FD": str(self.wfd)}

    def started(self) -> None:
        """Close our copy of the write end once the child has it: EOF when it dies."""
        os.close(self.wfd)

    def read(self, timeout: float = 0.0) -> bool:
        """Read what is there (waiting up to ``timeout``); False at end of file."""
        r, _, _ = select.select([self.rfd], [], [], timeout)
        if not r:
            return True
        try:
            data = os.read(self.rfd, 1 << 16)
        except BlockingIOError:
            return True
        if not data:
            return False
        self.buf += data
        *done, self.buf = self.buf.split(b"\n")
        self.lines += [d.decode() for d in done]
        return True

    def drain(self, timeout: float = 30.0) -> None:
        """Read up to end of file (the child is dead)."""
        deadline = time.monotonic() + timeout
        while self.read(0.2):
            assert time.monotonic() < deadline, "report pipe never closed"

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.rfd)

    def wait_for(self, prefix: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not any(ln.startswith(prefix) for ln in self.lines):
            left = deadline - time.monotonic()
            if left <= 0 or not self.read(min(left, 0.2)):
                return any(ln.startswith(prefix) for ln in self.lines)
        return True


def start_child(script: Path | str, args: list[str], env: dict[str, str], reports: Reports | None = None,
                **kwargs) -> subprocess.Popen:
    """Start ``python script *args`` (a path) or ``python -c script`` (code) with ``env``."""
    cmd = [sys.executable, str(script), *args] if isinstance(script, Path) else [sys.executable, "-c", script, *args]
    if reports is not None:
        env = {**env, **reports.env()}
        kwargs.setdefault("pass_fds", (reports.wfd,))
    kwargs.setdefault("stdout", subprocess.PIPE)
    kwargs.setdefault("stderr", subprocess.PIPE)
    proc = subprocess.Popen(cmd, env=env, text=True, **kwargs)
    if reports is not None:
        reports.started()
    return proc


def communicate(proc: subprocess.Popen, timeout: float = 120.0) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"process hung:\n{out}\n{err}") from None
    return proc.returncode, out or "", err or ""


@contextlib.contextmanager
def mounted_tmpfs(path: Path, size: str = "2m", *, readonly: bool = False, prepare=None):
    """Mount a tmpfs of ``size`` on ``path`` for the block (skip the test where mounting is
    not allowed); ``prepare(path)`` runs before a ``readonly`` remount."""
    path.mkdir(parents=True, exist_ok=True)
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): {p.stderr.strip()}")
    try:
        if prepare is not None:
            prepare(path)
        if readonly:
            p = subprocess.run(["mount", "-o", "remount,ro", str(path)], capture_output=True, text=True)
            if p.returncode != 0:
                pytest.skip(f"cannot remount the tmpfs read-only: {p.stderr.strip()}")
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)
