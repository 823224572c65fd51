"""What code ran: provenance recorded once per session, off the training thread.

:func:`start` (called by ``init`` on rank 0, and on local rank 0 of other machines)
starts one short-lived thread that collects the command line, the interpreter, the
versions of key libraries (torch, CUDA and NCCL only as an already imported torch
reports them: this module never imports torch or numpy), the installed distributions,
the git state of the code (commit, branch, remote URL without credentials, dirty flag,
the uncommitted diff capped at 1 MiB) and an allow-list of environment variables,
then writes ``provenance.r<rank>.s<session>.json`` (and, on rank 0, the diff as
``provenance.r<rank>.s<session>.diff``) into the run folder, each atomically.

Never secrets: a variable whose name holds TOKEN, KEY, SECRET, PASSWORD, PASSWD,
CREDENTIAL, AUTH or PASS is left out whatever its prefix, as is every ``AWS_*``;
user-info is stripped from URLs (``https://user:pw@host`` → ``https://host``) in
variables, the command line and git remotes; a command-line option named like a
secret (``--api-key X``, ``--token=X``) has its value replaced by ``<redacted>``.

git runs as a subprocess with a timeout, ``GIT_TERMINAL_PROMPT=0``, optional locks
off (it never takes the index lock from the user's own git), no external diff or
textconv drivers, no fsmonitor, and never touches the network.

The thread is a daemon (a git stuck on a hung file system must never keep the job
from exiting); ``Run.finish`` (also run at exit) waits up to 2 s for it, so a job that
ends at once still records its provenance. A signal or ``kill -9`` before it is
written leaves no file, never a torn one.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from collections.abc import Mapping

PROVENANCE_VERSION = 1
DIFF_LIMIT = 1 << 20  # bytes of uncommitted diff kept (the rest cut, "diff_truncated")
GIT_TIMEOUT_S = 5.0  # per git call
DEADLINE_S = 10.0  # the whole collection; what is not done by then is left out
MAX_DISTRIBUTIONS = 10_000
START_DELAY_S = 0.05  # the thread waits this long before collecting
MAX_VALUE_CHARS = 4096  # an environment value or command-line argument longer is cut

#: Environment variables recorded: these prefixes and names (then the deny rules).
ENV_PREFIXES = ("SLURM_", "TORCHELASTIC_", "NCCL_", "CUDA_", "TORCH_", "OMPI_COMM_WORLD_", "PMI_",
                "GLOO_", "NVIDIA_", "HIP_", "ROCR_", "NB_")
ENV_NAMES = frozenset({
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MASTER_ADDR", "MASTER_PORT",
    "WORLD_SIZE", "LOCAL_WORLD_SIZE", "RANK", "LOCAL_RANK", "GROUP_RANK", "GROUP_WORLD_SIZE",
    "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "PYTHONHASHSEED", "PYTHONPATH", "VIRTUAL_ENV",
    "CONDA_DEFAULT_ENV", "CUBLAS_WORKSPACE_CONFIG", "LD_LIBRARY_PATH", "HOSTNAME",
})
#: A name holding one of these (upper-cased) is never recorded. COMMENT: free text a user
#: gives the scheduler (``sbatch --comment``: SLURM_COMMENT, SLURM_JOB_COMMENT), which may
#: hold anything.
SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "PASS", "COOKIE",
                "SESSION_ID", "PRIVATE", "COMMENT")

_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/@\s?#]*@")


def is_secret_name(name: str) -> bool:
    """Whether an environment variable or option called ``name`` may hold a secret."""
    up = name.upper().replace("-", "_")
    return up.startswith("AWS_") or any(w in up for w in SECRET_WORDS)


def strip_userinfo(value: str) -> str:
    """``value`` with the user-info of every URL in it removed (``scheme://user:pw@host``
    becomes ``scheme://host``)."""
    return _URL_USERINFO.sub(r"\1", value)


def _cap(value: str) -> str:
    return value if len(value) <= MAX_VALUE_CHARS else value[:MAX_VALUE_CHARS] + "...<cut>"


def safe_env(env: Mapping[str, str]) -> dict[str, str]:
    """The allow-listed variables of ``env`` minus secret names, URLs without user-info."""
    out = {}
    for name, value in env.items():
        if not isinstance(name, str) or not isinstance(value, str):
            continue
        if not (name in ENV_NAMES or name.startswith(ENV_PREFIXES)) or is_secret_name(name):
            continue
        out[name] = _cap(strip_userinfo(value))
    return dict(sorted(out.items()))


def safe_argv(argv: list[str]) -> list[str]:
    """The command line with URL user-info stripped and values of secret-named options
    (``--token X``, ``--api-key=X``, ``-p X`` is kept: only long names are judged)
    replaced by ``<redacted>``."""
    out: list[str] = []
    redact_next = False
    for arg in argv:
        arg = str(arg)
        if redact_next:
            out.append("<redacted>")
            redact_next = False
            continue
        if arg.startswith("--") and len(arg) > 2:
            name, eq, _value = arg[2:].partition("=")
            if is_secret_name(name):
                if eq:
                    out.append(f"--{name}=<redacted>")
                else:
                    out.append(arg)
                    redact_next = True
                continue
        out.append(_cap(strip_userinfo(arg)))
    return out


def _libraries() -> dict:
    """Versions of key libraries, only as they are already imported (nothing imported here)."""
    from .._version import __version__

    out: dict = {"nblog": __version__}
    mods = sys.modules
    torch = mods.get("torch")
    if torch is not None:
        info: dict = {"version": str(getattr(torch, "__version__", None))}
        ver = getattr(torch, "version", None)
        info["cuda"] = getattr(ver, "cuda", None)
        info["hip"] = getattr(ver, "hip", None)
        info["git_version"] = getattr(ver, "git_version", None)
        try:
            nccl = torch.cuda.nccl.version()  # the NCCL torch was built with; no CUDA init
            info["nccl"] = ".".join(str(p) for p in nccl) if isinstance(nccl, tuple) else str(nccl)
        except Exception:
            info["nccl"] = None
        out["torch"] = info
    for name in ("numpy", "lightning", "pytorch_lightning", "transformers", "accelerate", "deepspeed",
                 "jax", "triton"):
        mod = mods.get(name)
        if mod is not None:
            out[name] = str(getattr(mod, "__version__", None))
    return out


def _distributions(deadline: float, path: list[str] | None = None) -> dict[str, str] | None:
    """Installed distributions (name → version) importable from ``path`` (``sys.path``),
    the first of a name winning, as imports do. Read from the names of the
    ``<name>-<version>.dist-info`` and ``.egg-info`` folders, as ``importlib.metadata``
    finds them, without parsing each one's metadata (that took 150 ms of the GIL for a
    hundred distributions; listing the folders takes about a millisecond)."""
    out: dict[str, str] = {}
    for entry in list(sys.path if path is None else path):
        if time.monotonic() > deadline or len(out) >= MAX_DISTRIBUTIONS:
            break
        try:
            names = os.listdir(entry or ".")
        except (OSError, TypeError):
            continue
        for name in names:
            if name.endswith(".dist-info"):
                base = name[: -len(".dist-info")]
            elif name.endswith(".egg-info"):
                base = name[: -len(".egg-info")]
            else:
                continue
            dist, _, version = base.partition("-")
            if not dist:
                continue
            if version.count("-"):  # egg-info: name-version-pyX.Y
                version = version.split("-", 1)[0]
            key = dist.replace("_", "-").replace(".", "-").lower()
            out.setdefault(key, version or "?")
    return dict(sorted(out.items()))


def _git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in ("GIT_DIR", "GIT_WORK_TREE")}
    env.update(GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", LC_ALL="C", GIT_ASKPASS="true",
               SSH_ASKPASS="true", GIT_PAGER="cat", PAGER="cat")
    return env


def _git(args: list[str], cwd: str, env: dict, deadline: float, limit: int = 1 << 16) -> tuple[int, bytes]:
    """``(exit status, stdout capped at limit bytes)`` of one git call; (-1, b"") when
    git is missing, times out or the deadline passed."""
    import subprocess

    left = min(GIT_TIMEOUT_S, deadline - time.monotonic())
    if left <= 0:
        return -1, b""
    cmd = ["git", "-c", "core.fsmonitor=false", "-c", "core.untrackedCache=false",
           "-c", "diff.external=", "-C", cwd, *args]
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, env=env, timeout=left, check=False)
    except (OSError, subprocess.SubprocessError, ValueError):
        return -1, b""
    return proc.returncode, proc.stdout[:limit]


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace").strip()


def code_dir(argv: list[str], cwd: str) -> str:
    """The folder of the code that runs: the main script's folder, else ``cwd``."""
    if argv:
        script = argv[0]
        if script and script not in ("-c", "-m", "-") and os.path.isfile(script):
            return os.path.dirname(os.path.abspath(script))
    return cwd


def git_state(folder: str, deadline: float, with_diff: bool = True) -> tuple[dict | None, bytes | None]:
    """``(git info, uncommitted diff or None)`` for the repository holding ``folder``;
    ``(None, None)`` when it is in none (or git is missing).

    Info keys: root, commit, branch (None when detached), remote (URL of ``origin``, else
    of the first remote, without user-info or query), dirty (tracked changes, staged or
    not), untracked (count of untracked files, capped at 1000), diff_bytes (the diff's
    full size), diff_truncated.
    """
    env = _git_env()
    rc, out = _git(["rev-parse", "--show-toplevel", "HEAD"], folder, env, deadline)
    lines = _text(out).splitlines()
    if rc != 0 or not lines:
        rc, out = _git(["rev-parse", "--show-toplevel"], folder, env, deadline)  # no commit yet
        if rc != 0:
            return None, None
        lines = [_text(out)]
    info: dict = {"root": lines[0], "commit": lines[1] if len(lines) > 1 else None}
    rc, out = _git(["symbolic-ref", "--short", "-q", "HEAD"], folder, env, deadline)
    info["branch"] = _text(out) if rc == 0 and out.strip() else None
    remote = None
    rc, out = _git(["remote"], folder, env, deadline)
    names = _text(out).split() if rc == 0 else []
    if names:
        name = "origin" if "origin" in names else names[0]
        rc, out = _git(["config", "--get", f"remote.{name}.url"], folder, env, deadline)
        if rc == 0 and out.strip():
            remote = strip_userinfo(_text(out)).split("?", 1)[0].split("#", 1)[0]
    info["remote"] = remote
    rc, out = _git(["status", "--porcelain=v1", "-z", "--untracked-files=normal"], folder, env, deadline,
                   limit=1 << 22)
    if rc == 0:
        entries = [e for e in out.split(b"\0") if e]
        info["untracked"] = min(1000, sum(1 for e in entries if e.startswith(b"??")))
        info["dirty"] = any(not e.startswith(b"??") and len(e) > 3 and e[2:3] == b" " for e in entries)
    else:
        info["untracked"] = None
        info["dirty"] = None
    diff = None
    info["diff_bytes"] = 0
    info["diff_truncated"] = False
    if info["dirty"] and with_diff and info["commit"]:
        rc, out = _git(["diff", "--no-ext-diff", "--no-textconv", "--no-color", "HEAD", "--"], folder, env,
                       deadline, limit=DIFF_LIMIT + 1)
        if rc == 0:
            info["diff_truncated"] = len(out) > DIFF_LIMIT
            diff = out[:DIFF_LIMIT]
            info["diff_bytes"] = len(diff)
    return info, diff


def collect(env: Mapping[str, str], argv: list[str], cwd: str, *, rank: int, session: int,
            launcher: dict, with_diff: bool, deadline: float) -> tuple[dict, bytes | None]:
    """The provenance record (a JSON-able dict) and the uncommitted diff (or None)."""
    import platform

    t0 = time.monotonic()
    record: dict = {
        "provenance_version": PROVENANCE_VERSION,
        "rank": rank,
        "session": session,
        "time": time.time(),
        "pid": os.getpid(),
        "argv": safe_argv(list(argv)),
        "orig_argv": safe_argv(list(getattr(sys, "orig_argv", []) or [])),
        "executable": sys.executable,
        "cwd": cwd,
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "build": " ".join(platform.python_build()),
            "compiler": platform.python_compiler(),
        },
        "platform": {"system": platform.system(), "release": platform.release(),
                     "machine": platform.machine(), "node": platform.node()},
        "launcher": {k: (strip_userinfo(v) if isinstance(v, str) else v) for k, v in launcher.items()},
        "env": safe_env(env),
    }
    record["libraries"] = _libraries()
    git, diff = git_state(code_dir(list(argv), cwd), deadline, with_diff)
    record["git"] = git
    record["distributions"] = _distributions(deadline)
    record["collect_s"] = round(time.monotonic() - t0, 4)
    return record, diff


def _record(run_dir: str, env: Mapping[str, str], argv: list[str], cwd: str, rank: int, session: int,
            launcher: dict, with_diff: bool) -> None:
    from .. import _log as log
    from ..format._filenames import provenance_file_name
    from ..format._filesafety import write_atomic
    from ..format._runfile import write_json_atomic

    time.sleep(START_DELAY_S)  # let init return first: this thread would hold the GIL
    try:
        record, diff = collect(env, argv, cwd, rank=rank, session=session, launcher=launcher,
                               with_diff=with_diff, deadline=time.monotonic() + DEADLINE_S)
        if diff:
            name = provenance_file_name(rank, session, "diff")
            write_atomic(os.path.join(run_dir, name), diff)
            record["git"]["diff_file"] = name
        write_json_atomic(os.path.join(run_dir, provenance_file_name(rank, session)), record)
    except Exception as err:  # never into training; a thread that dies says why, once
        log.warning("nblog: could not record provenance in %s: %r", run_dir, err)


def start(run_dir: str, env: Mapping[str, str], *, rank: int, session: int, launcher: dict,
          with_diff: bool = True) -> threading.Thread:
    """Collect and write provenance in a new thread (``nblog-provenance``); returns it.

    Takes a few microseconds in the caller: the command line and working folder are
    read here (they may change later), everything else in the thread.
    """
    argv = list(sys.argv)
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = "?"
    t = threading.Thread(target=_record, name="nblog-provenance", daemon=True,
                         args=(run_dir, env, argv, cwd, rank, session, dict(launcher), with_diff))
    t.start()
    return t
