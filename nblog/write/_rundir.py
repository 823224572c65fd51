"""Run folders: rank 0 makes them, the other ranks wait for them.

Rank 0 makes ``<root>/<project>`` and ``<root>/<project>/<run id>``
(:func:`make_project_dir`, :func:`make_run_dir`): a new folder for a new run, the
existing one for a resume or a restart of the same job, a new random id after a
collision of random ids; :func:`remove_empty` takes back what it made when nothing
could be recorded. The other ranks never create anything: each polls until rank 0
of its own launch has opened the run (its session in ``run.json``), at most
``NB_WAIT_S`` seconds (:func:`wait_for`), with a back-off that keeps thousands of
ranks from flooding a shared file system and a way of looking that a network file
system's cache of names not found cannot fool (:func:`_listed`). Settings resolution
is ``_settings``'; the session and ``run.json`` are ``_init``'s.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable

from .. import _log as log
from ..format._filenames import RUN_JSON
from ..format._runfile import read_run_json
from ._runid import random_run_id


def make_project_dir(project_dir: str) -> bool:
    """Make the project folder (and its parents) if it is missing; True if this call
    made it. Raises ``OSError`` naming the folder when it cannot be made, and
    ``PermissionError`` when it is not writable."""
    made_project = not os.path.isdir(project_dir)
    try:
        os.makedirs(project_dir, exist_ok=True)
    except OSError as err:
        raise type(err)(err.errno, f"nblog: cannot create the project folder {project_dir}: {err.strerror}") from None
    if not os.access(project_dir, os.W_OK | os.X_OK):
        raise PermissionError(f"nblog: the project folder {project_dir} is not writable ({_why_unwritable(project_dir)})")
    return made_project


def make_run_dir(project_dir: str, rid: str, how: str, *, resume: str | None, name: str | None,
                 job_id: str | None, job_source: str | None) -> tuple[str, str, bool]:
    """Rank 0's run folder for run id ``rid`` (``how``: "explicit", "derived" or
    "random"): ``(folder, run id, existed)``. A missing folder is made (``resume="must"``
    raises ``FileNotFoundError`` instead); an existing one is continued, except that a
    random id draws again and an explicit id without ``resume`` raises
    ``FileExistsError``. Raises ``NotADirectoryError`` where a file has the folder's
    name and ``OSError`` (naming the folder) when it cannot be made."""
    for _attempt in range(100):
        run_dir = os.path.join(project_dir, rid)
        exists = os.path.isdir(run_dir)
        if not exists:
            if resume == "must":
                derived = f" (derived from the job id {job_id!r}, {job_source})" if how == "derived" else ""
                raise FileNotFoundError(
                    f"nblog: resume='must' but run {rid!r}{derived} does not exist in {project_dir}"
                )
            try:
                os.mkdir(run_dir)
                return run_dir, rid, False
            except FileExistsError:
                if not os.path.isdir(run_dir):  # a file (or a link to one) where the folder goes
                    raise NotADirectoryError(errno.ENOTDIR, f"nblog: {run_dir} exists and is not a folder") from None
                # made meanwhile by another process: an existing run folder, as below
            except OSError as err:
                raise type(err)(err.errno, f"nblog: cannot create the run folder {run_dir}: {err.strerror}") from None
        if how == "random":  # a collision of random ids: draw again
            rid = random_run_id(name)
            continue
        if how == "explicit" and resume is None:
            raise FileExistsError(
                f"nblog: run {rid!r} already exists in {project_dir}; pass resume='auto' "
                "(or set NB_RESUME=auto) to continue it in a new session"
            )
        if how == "derived":
            log.info("nblog: run %s exists for this job id: continuing it in a new session", rid)
        return run_dir, rid, True
    raise FileExistsError(f"nblog: could not find a free run id in {project_dir}")


def remove_empty(run_dir: str, project_dir: str | None) -> None:
    """Remove the run folder this init created (and the project folder, if this init
    created it too), each only if empty."""
    for folder in (run_dir, project_dir):
        if folder is None:
            continue
        try:
            os.rmdir(folder)
        except OSError:
            return


def _why_unwritable(path: str) -> str:
    """The likely reason ``os.access`` refused to write in ``path``."""
    try:
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return "read-only file system"
    except (OSError, AttributeError):
        pass
    return "permission denied: check its owner, mode and attributes"


#: The first poll of a non-zero rank waiting for rank 0 comes after this many seconds;
#: each next one WAIT_GROWTH times later, up to a cap that grows with the job
#: (:func:`wait_cap`), and each drawn at random between half and all of that
#: (ranks started together do not poll together).
WAIT_FIRST_S = 0.02
WAIT_GROWTH = 1.6
#: run.json is read again at least this often even when its stat has not changed (an
#: attribute cache of a network file system may show the old file's stat for a while).
WAIT_REREAD_S = 30.0


def _random() -> float:
    """A number in [0, 1) (the random module costs an import for one number)."""
    return int.from_bytes(os.urandom(4), "little") / 4294967296


def wait_cap(world_size: int) -> float:
    """The longest pause between two polls: 0.5 s up to 128 ranks, growing with the job
    to 10 s from 2,560 ranks on, so that 8,192 ranks waiting make about 8,192 / 7.5 polls
    a second in all (a poll is 5 calls before run.json appears, 1 after)."""
    return min(10.0, max(0.5, world_size / 256))


def wait_for(run_dir: str, wait_s: float, launch: dict[str, str], *, world_size: int = 1,
              sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
              rand: Callable[[], float] | None = None,
              read: Callable[[str], dict | None] = read_run_json) -> dict | None:
    """Poll until rank 0 has opened the run for this launch; run.json's content then
    (``{}`` when it cannot be parsed and no launch is asked for), None after ``wait_s`` s.

    With launcher variables (``launch``), the run must have a session that rank 0 of
    the same launch started: a rank of a relaunch whose rank 0 refused to reuse the
    run id, or has not yet added its session, must not write into the old run.
    Without any, run.json existing is enough.

    Metadata calls on the shared folder: until run.json is listed, one listing per
    poll of the nearest folder not yet seen (open, fstat, getdents64 ×2, close), each
    folder looked up only once its parent listed it (see :func:`_listed`); then one
    ``stat`` of run.json per poll, and a read (open, fstat, read, close) only when
    its inode, size or modification time changed, or :data:`WAIT_REREAD_S` after the
    last read. Polls back off with jitter (:data:`WAIT_FIRST_S`, :func:`wait_cap`).
    ``sleep``, ``clock``, ``rand`` (in [0, 1)) and ``read`` are injected for tests.
    """
    rand = rand or _random
    deadline = clock() + wait_s
    cap = wait_cap(world_size)
    delay = WAIT_FIRST_S
    path = os.path.join(run_dir, RUN_JSON)
    known: set[str] = set()
    seen: tuple | None = None  # (inode, size, mtime) of run.json when last read
    read_at = 0.0
    while True:
        if path in known or _listed(path, known):
            known.add(path)
            try:
                st = os.stat(path)
                stat = (st.st_ino, st.st_size, st.st_mtime_ns)
            except OSError:
                stat = None
            if stat is not None and (stat != seen or clock() >= read_at):
                meta = read(run_dir)
                seen, read_at = (stat, clock() + WAIT_REREAD_S) if meta is not None else (None, 0.0)
                if not launch:
                    return meta or {}
                if meta is not None and any(isinstance(s, dict) and s.get("launch") == launch
                                            for s in meta.get("sessions") or []):
                    return meta
        now = clock()
        if now >= deadline:
            return None
        sleep(min(delay * (0.5 + 0.5 * rand()), max(0.0, deadline - now)))
        delay = min(delay * WAIT_GROWTH, cap)


def wait_for_rank0(run_dir: str, wait_s: float, launch: dict[str, str], *, rank: int,
                   world_size: int) -> dict | None:
    """:func:`wait_for` as ``init`` calls it on rank ``rank``: run.json's content once
    rank 0 of this launch has opened the run, None after ``wait_s`` seconds (``NB_WAIT_S``),
    then warned: this rank logs nothing, and the warning names the usual cause (a
    network file system's cache) and a longer ``NB_WAIT_S``."""
    meta = wait_for(run_dir, wait_s, launch, world_size=world_size)
    if meta is None:
        log.warning(
            "nblog: rank %d waited %.0f s for rank 0 of this launch to open %s; logging "
            "nothing on this rank. If rank 0 did open it, this machine's view of the "
            "shared folder lags behind: a network file system's cache of directory "
            "listings or of names not found (NFS acdirmax/lookupcache, sshfs dir_cache/"
            "dcache_timeout, FUSE negative_timeout) can hide it for that cache's timeout. "
            "Set NB_WAIT_S to wait longer (e.g. NB_WAIT_S=%.0f).",
            rank,
            wait_s,
            run_dir,
            max(300.0, 2 * wait_s),
        )
    return meta


def _listed(path: str, known: set[str]) -> bool:
    """Whether ``path`` (``<root>/<project>/<run id>/run.json``) exists, judged from
    listings of its folders, each listed only once its own parent listed it: a name
    that is not there yet is never looked up, since a network file system's cache of
    names not found (FUSE ``negative_timeout``, NFS ``lookupcache``) would then answer
    "absent" for its whole timeout. ``known``: folders already seen, kept by the caller.
    A folder listed that a lookup still says is absent (another process of this machine
    looked it up early) is looked up again by ``mkdir``, which the kernel never answers
    from that cache; it exists, so nothing is created."""
    run_dir = os.path.dirname(path)
    project_dir = os.path.dirname(run_dir)
    chain = [os.path.dirname(project_dir), project_dir, run_dir, path]
    for parent, child in zip(chain, chain[1:], strict=False):
        if child in known:
            continue
        try:
            names = os.listdir(parent or ".")
        except OSError:
            return False
        if os.path.basename(child) not in names:
            return False
        if child != path:
            if not os.path.isdir(child):
                _look_up_again(child)
            known.add(child)
    return True


def _look_up_again(folder: str) -> None:
    """Refresh a cached "not found" for ``folder``, which a listing showed: ``mkdir``
    looks the name up afresh and fails with ``EEXIST``. Should the folder be gone after
    all, the one this made is removed at once."""
    try:
        os.mkdir(folder)
    except OSError:
        return
    try:
        os.rmdir(folder)
    except OSError:
        pass

