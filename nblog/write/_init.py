"""``nblog.init``: settings, ranks, the run id, the run folder, run.json and the session."""

from __future__ import annotations

import errno
import os
import sys
import time
from collections.abc import Callable, Mapping

from .. import _log as log
from .._version import __version__
from ..format import _format as F
from ..format._filenames import RUN_JSON, event_file_name
from ..format._host import hostname
from ..format._names import check_name
from ..format._runfile import (
    RunFile,
    next_session,
    read_run_json,
    to_json_config,
)
from . import _lifecycle
from ._launch import RankInfo, detect_ranks
from ._resume_step import resume_step
from ._run import Run
from ._runid import derive_run_id, random_run_id, shared_job_id
from ._session import load_run_json_for_resume
from ._settings import Settings, resolve
from ._writer import Writer

_RESTART_VARS = ("TORCHELASTIC_RESTART_COUNT", "SLURM_RESTART_COUNT")
# Variables equal on every rank of one launch and new at the next one: rank 0 records
# them in its session, and other ranks join only a session of their own launch.
_LAUNCH_VARS = (
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT",
    "SLURM_JOB_ID",
    "SLURM_RESTART_COUNT",
)


def launch_identity(env: Mapping[str, str]) -> dict[str, str]:
    """The launcher's variables that identify this launch (equal on all its ranks)."""
    return {k: env[k] for k in _LAUNCH_VARS if env.get(k)}


def init(
    project: str = "default",
    *,
    run_name: str | None = None,
    run_id: str | None = None,
    config: object = None,
    root: str | os.PathLike | None = None,
    resume: str | None = None,
    timing_all_ranks: bool = False,
    scalars_all_ranks: bool | None = None,
    system: bool | list[str] | tuple[str, ...] = True,
    system_interval: float | None = None,
    flush_interval: float | None = None,
    mode: str | None = None,
    strict: bool | None = None,
    provenance: bool | None = None,
    console: bool | None = None,
    _environ: Mapping[str, str] | None = None,
) -> Run:
    """Start (or resume) logging a run; call on every rank, or on rank 0 only.

    Never waits for other ranks and never uses torch.distributed. Rank, local rank and
    world size come from torchrun (``RANK``...), then Open MPI (``OMPI_COMM_WORLD_*``),
    then Slurm (``SLURM_PROCID``...). The run folder is ``<root>/<project>/<run id>``.

    One active run per rank and process: calling ``init`` again while a run of the same
    rank that this process started is not finished warns and finishes that run first
    (status "finished"), then starts the new one, as if ``run.finish()`` had been called.

    A new session of an existing run (resume, requeue, restart) continues the step
    counter of ``add_scalar`` without a step after the run's last step (read from rank
    0's event logs, so also after a ``kill -9``); on every rank the counter starts
    there. Explicit steps are kept as given.

    Args:
        project: project name (a path component: no ``/``, ``\\``, ``..``, NUL or
            control characters).
        run_name: a human name; the run id starts with its slug.
        run_id: use this run id on every rank (overrides ``$NB_RUN_ID``; ``""`` raises
            ``ValueError``, an empty ``$NB_RUN_ID`` counts as unset). Without one,
            a shared job id (``TORCHELASTIC_RUN_ID`` given with ``--rdzv-id``, then
            ``SLURM_JOB_ID``, then torchrun's own uuid) derives the same id on every
            rank; with none, rank 0 draws a random id and other ranks log nothing.
        config: hyper-parameters (mapping, dataclass, ``argparse.Namespace``,
            ``to_dict()`` object, OmegaConf), stored in ``run.json``.
        root: folder holding projects; else ``$NB_DIR``, else ``./nb_runs``.
        resume: None (default): an explicit run id that exists raises
            ``FileExistsError``; "auto": continue it in a new session, or create it;
            "must": continue it, raise ``FileNotFoundError`` if missing. ``$NB_RESUME``
            sets it. A run id derived from a shared job id that exists is a restart of
            that job and always continues.
        timing_all_ranks: every timer logs on every rank into that rank's own file.
        scalars_all_ranks: every ``add_scalar`` logs on every rank into that rank's own
            event log, as ``add_scalar(..., all_ranks=True)`` does (``$NB_SCALARS_ALL_RANKS=1``;
            default off: only rank 0 logs scalars, the others' ``add_scalar`` costs ~50 ns).
        system: system metric groups sampled by local rank 0 of each machine: True
            (all), False, or a list of "cpu", "memory", "disk", "network", "gpu"
            (``$NB_SYSTEM`` when left True).
        system_interval: seconds between samples (default 30, ``$NB_SYSTEM_INTERVAL``).
        flush_interval: seconds between background writes (default 1,
            ``$NB_FLUSH_INTERVAL``): the most a ``kill -9`` can lose.
        mode: "online" (default) or "disabled" (every call a no-op; ``$NB_MODE``).
        strict: bad data raises ``StrictModeError`` instead of warning (``$NB_STRICT=1``).
        provenance: record what code ran once per session, in a thread of its own
            (rank 0, and local rank 0 of other machines): ``provenance.r<rank>.s<session>.json``
            (command line, versions, installed distributions, git commit/branch/remote/
            dirty flag, allow-listed environment without secrets) and on rank 0 the
            uncommitted diff (``.diff``, at most 1 MiB). False (or ``$NB_PROVENANCE=0``): none.
        console: capture this process's stdout and stderr at the file-descriptor level
            (C/C++, CUDA and NCCL messages too) into ``console.r<rank>.s<session>.log``
            in the run folder, each line stamped with the time and the current step,
            still echoed to the original streams; on every rank that knows the run
            folder (``$NB_CONSOLE=1``; off by default). Lasts until the process exits
            or the next ``init``. The file holds whatever the program prints: print no
            secrets. Read it with ``nb logs``.

    Returns:
        A :class:`Run`. Files created: on rank 0 ``run.json`` and
        ``events.r0.s<session>.log``; on other ranks an event log only when they log
        timers or system metrics. Threads started: one writer per writing process, one
        system sampler on local rank 0. With ``console``: ``console.r<rank>.s<session>.log``,
        one helper process (``python -I -S``) and one thread per capturing process.

    Raises:
        ValueError: a bad name, argument or launcher variable; resume="must" on rank 0
            without a run id (no ``run_id``, ``$NB_RUN_ID`` or shared job id).
        FileExistsError: rank 0, explicit run id exists and resume is None.
        FileNotFoundError: rank 0, resume="must" and the run does not exist.
        OSError: rank 0 cannot create the run folder or write ``run.json`` of a new
            run (the message names the path). A new run on a full disk (``ENOSPC``,
            ``EDQUOT``) raises too, nothing being recorded yet: the folders this init
            made are removed. A resumed run (a requeue) onto a full disk does not
            raise: the job was running before, so it warns once and returns a run
            that records nothing for this session (run.json keeps its history).
    """
    env = os.environ if _environ is None else _environ
    settings = resolve(
        env,
        root=os.fspath(root) if root is not None else None,
        mode=mode,
        strict=strict,
        resume=resume,
        run_id=run_id,
        flush_interval=flush_interval,
        system=system,
        system_interval=system_interval,
        timing_all_ranks=timing_all_ranks,
        scalars_all_ranks=scalars_all_ranks,
        provenance=provenance,
        console=console,
    )
    check_name(project, "project")
    if run_name is not None:
        check_name(run_name, "run_name")
    if settings.run_id is not None:
        check_name(settings.run_id, "run_id")
    config_json = to_json_config(config)
    ranks = detect_ranks(env)
    for active in _lifecycle.active(ranks.rank):
        log.warning(
            "nblog: init() called while run %r (rank %d) of this process is active; finishing "
            "it first (call run.finish() before starting another run)", active.id, ranks.rank,
        )
        active.finish()
    if settings.mode == "disabled":
        return _inert(project, run_name, "", None, ranks, config_json, settings)

    job_id, job_source = shared_job_id(env)
    if settings.run_id is not None:
        rid, how = settings.run_id, "explicit"
    elif job_id is not None:
        rid, how = derive_run_id(project, run_name, job_id), "derived"
    elif ranks.rank == 0:
        if settings.resume == "must":  # a random id never names a run to continue
            raise ValueError(
                "nblog: resume='must' needs the id of the run to continue: pass run_id=, set "
                "NB_RUN_ID, or run under a launcher with a shared job id (Slurm, torchrun --rdzv-id)"
            )
        rid, how = random_run_id(run_name), "random"
    else:
        if ranks.local_rank == 0 and settings.system:
            log.warning(
                "nblog: rank %d cannot learn the run id (no shared job id), so this machine's "
                "system metrics are not recorded. Run under Slurm, give torchrun "
                "--rdzv-backend c10d --rdzv-endpoint HOST:PORT --rdzv-id ID, or set NB_RUN_ID.",
                ranks.rank,
            )
        return _inert(project, run_name, "", None, ranks, config_json, settings)

    project_dir = os.path.join(settings.root, project)
    host = hostname(env)
    if ranks.rank == 0:
        run = _open_rank0(
            project, run_name, rid, how, job_id, job_source, project_dir, ranks, config_json,
            settings, host, env,
        )
        _start_provenance(run, settings, ranks, env, host, job_id, job_source)
        return run
    run_dir = os.path.join(project_dir, rid)
    launch = launch_identity(env)
    meta = _wait_for(run_dir, settings.wait_s, launch, world_size=ranks.world_size)
    if meta is None:
        log.warning(
            "nblog: rank %d waited %.0f s for rank 0 of this launch to open %s; logging "
            "nothing on this rank. If rank 0 did open it, this machine's view of the "
            "shared folder lags behind: a network file system's cache of directory "
            "listings or of names not found (NFS acdirmax/lookupcache, sshfs dir_cache/"
            "dcache_timeout, FUSE negative_timeout) can hide it for that cache's timeout. "
            "Set NB_WAIT_S to wait longer (e.g. NB_WAIT_S=%.0f).",
            ranks.rank,
            settings.wait_s,
            run_dir,
            max(300.0, 2 * settings.wait_s),
        )
        return _inert(project, run_name, rid, None, ranks, config_json, settings)
    session, step_start = _rank_session(run_dir, ranks.rank, launch, meta)
    run = _make_run(
        project, run_name, rid, run_dir, ranks, None, config_json, settings, host, env,
        job_id, job_source, session=session, step_start=step_start,
    )
    _start_provenance(run, settings, ranks, env, host, job_id, job_source)
    return run


def _start_provenance(run: Run, settings: Settings, ranks: RankInfo, env: Mapping[str, str], host: str,
                      job_id: str | None, job_source: str | None) -> None:
    """Record provenance in a thread of its own (rank 0 with the uncommitted diff, local
    rank 0 of other machines without), started last so that init never waits for the
    GIL while it collects."""
    if not settings.provenance or run.dir is None or not (ranks.rank == 0 or ranks.local_rank == 0):
        return
    from ._provenance import start

    launcher = {"launcher": ranks.launcher, "rank": ranks.rank, "local_rank": ranks.local_rank,
                "world_size": ranks.world_size, "host": host, "job_id": job_id,
                "job_id_source": job_source, **launch_identity(env)}
    try:
        run._provenance = start(run.dir, env, rank=ranks.rank, session=run.session, launcher=launcher,
                                with_diff=ranks.rank == 0)
    except RuntimeError as err:  # no thread can be started (interpreter shutting down)
        log.info("nblog: provenance not recorded: %s", err)


def _inert(project: str, name: str | None, rid: str, run_dir: str | None, ranks: RankInfo, config: dict,
           settings: Settings, session: int = 0) -> Run:
    """A Run that records nothing; ``session``: the session number it would have had
    (a resume that could not write run.json says which session is not recorded)."""
    return Run(
        project=project, name=name, run_id=rid, run_dir=run_dir, rank=ranks.rank,
        local_rank=ranks.local_rank, world_size=ranks.world_size, session=session, config=config,
        is_logging=False, timing_all_ranks=settings.timing_all_ranks, strict=settings.strict,
        make_writer=None,
    )


def _rank_session(run_dir: str, rank: int, launch: dict[str, str], known: dict | None = None) -> tuple[int, int]:
    """A non-zero rank's session and the start of its step counter.

    The session comes after its own files and rank 0's latest session. Known at init
    (the rank waited for rank 0's session of its launch), so ``run.session`` is right
    before the rank writes anything. The counter starts where rank 0's session of
    this launch (else its latest) started it, so timers at the current step agree
    with rank 0's steps. ``known``: run.json as the rank's wait read it (else it is read).
    """
    if known is None:
        known = read_run_json(run_dir) or {}
    sessions = [s for s in known.get("sessions") or [] if isinstance(s, dict)]
    latest = max((s.get("session", 0) for s in sessions), default=0)
    mine = [s for s in sessions if launch and s.get("launch") == launch] or sessions
    entry = max(mine, key=lambda s: s.get("session", 0) if isinstance(s.get("session"), int) else 0,
                default=None)
    start = entry.get("step_start") if entry is not None else 0
    if start.__class__ is not int or start < 0:  # written by an older nblog: rank 0's logs
        before = entry.get("session") if entry is not None else None
        start = resume_step(run_dir, sessions, before=before if before.__class__ is int else None)
    return next_session(run_dir, rank, at_least=latest), start


#: The first poll of a non-zero rank waiting for rank 0 comes after this many seconds;
#: each next one WAIT_GROWTH times later, up to a cap that grows with the job
#: (:func:`_wait_cap`), and each drawn at random between half and all of that
#: (ranks started together do not poll together).
WAIT_FIRST_S = 0.02
WAIT_GROWTH = 1.6
#: run.json is read again at least this often even when its stat has not changed (an
#: attribute cache of a network file system may show the old file's stat for a while).
WAIT_REREAD_S = 30.0


def _random() -> float:
    """A number in [0, 1) (the random module costs an import for one number)."""
    return int.from_bytes(os.urandom(4), "little") / 4294967296


def _wait_cap(world_size: int) -> float:
    """The longest pause between two polls: 0.5 s up to 128 ranks, growing with the job
    to 10 s from 2,560 ranks on, so that 8,192 ranks waiting make about 8,192 / 7.5 polls
    a second in all (a poll is 5 calls before run.json appears, 1 after)."""
    return min(10.0, max(0.5, world_size / 256))


def _wait_for(run_dir: str, wait_s: float, launch: dict[str, str], *, world_size: int = 1,
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
    last read. Polls back off with jitter (:data:`WAIT_FIRST_S`, :func:`_wait_cap`).
    ``sleep``, ``clock``, ``rand`` (in [0, 1)) and ``read`` are injected for tests.
    """
    rand = rand or _random
    deadline = clock() + wait_s
    cap = _wait_cap(world_size)
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


def _open_rank0(project: str, name: str | None, rid: str, how: str, job_id: str | None, job_source: str | None,
                project_dir: str, ranks: RankInfo, config: dict, settings: Settings, host: str,
                env: Mapping[str, str]) -> Run:
    made_project = not os.path.isdir(project_dir)
    try:
        os.makedirs(project_dir, exist_ok=True)
    except OSError as err:
        raise type(err)(err.errno, f"nblog: cannot create the project folder {project_dir}: {err.strerror}") from None
    if not os.access(project_dir, os.W_OK | os.X_OK):
        raise PermissionError(f"nblog: the project folder {project_dir} is not writable ({_why_unwritable(project_dir)})")
    for _attempt in range(100):
        run_dir = os.path.join(project_dir, rid)
        exists = os.path.isdir(run_dir)
        if not exists:
            if settings.resume == "must":
                derived = f" (derived from the job id {job_id!r}, {job_source})" if how == "derived" else ""
                raise FileNotFoundError(
                    f"nblog: resume='must' but run {rid!r}{derived} does not exist in {project_dir}"
                )
            try:
                os.mkdir(run_dir)
                break
            except FileExistsError:
                if not os.path.isdir(run_dir):  # a file (or a link to one) where the folder goes
                    raise NotADirectoryError(errno.ENOTDIR, f"nblog: {run_dir} exists and is not a folder") from None
                exists = True
            except OSError as err:
                raise type(err)(err.errno, f"nblog: cannot create the run folder {run_dir}: {err.strerror}") from None
        if how == "random":  # a collision of random ids: draw again
            rid = random_run_id(name)
            continue
        if how == "explicit" and settings.resume is None:
            raise FileExistsError(
                f"nblog: run {rid!r} already exists in {project_dir}; pass resume='auto' "
                "(or set NB_RESUME=auto) to continue it in a new session"
            )
        if how == "derived":
            log.info("nblog: run %s exists for this job id: continuing it in a new session", rid)
        break
    else:
        raise FileExistsError(f"nblog: could not find a free run id in {project_dir}")

    old = load_run_json_for_resume(run_dir) if exists else None
    sessions = list(old.get("sessions", [])) if old else []
    session = next_session(run_dir, 0, at_least=max((s.get("session", -1) for s in sessions), default=-1) + 1)
    now = time.time()
    entry = {
        "session": session,
        "start": now,
        "host": host,
        "pid": os.getpid(),
        "first_step": None,
        "last_step": None,
        "end": None,
        "end_reason": None,
        "world_size": ranks.world_size,
        "restart_counts": {k: env[k] for k in _RESTART_VARS if k in env},
        "launch": launch_identity(env),
        # where add_scalar's counter starts: after the run's last step (_resume_step)
        "step_start": resume_step(run_dir, sessions, before=session) if exists else 0,
    }
    if old and config and config != old.get("config"):
        entry["config"] = config  # the run keeps its first config; a changed one is kept here
    hosts = list(old.get("hosts", [])) if old else []
    if host not in hosts:
        hosts.append(host)
    data = {
        "format_version": F.FORMAT_VERSION,
        "nblog_version": __version__,
        "project": project,
        "id": rid,
        "name": name,
        "config": old.get("config", config) if old else config,
        "created": old.get("created", now) if old else now,
        "world_size": ranks.world_size,
        "launcher": ranks.launcher,
        "job_id": job_id,
        "job_id_source": job_source,
        "run_id_source": how,
        "hosts": hosts,
        "status": "running",
        "sessions": sessions + [entry],
        "settings": settings.to_json(),
    }
    if old and isinstance(old.get("summary"), dict):  # a resumed session folds its points in
        data["summary"] = old["summary"]
    runfile = RunFile(run_dir, data)
    try:  # before the event log: a disk too full for run.json leaves no empty log behind
        runfile.save()
    except OSError as err:
        if exists and err.errno in _DISK_FULL:  # a requeue onto a full disk: the job goes on
            log.warning(
                "nblog: cannot write %s: %s; training goes on, but session %d of run %r is not "
                "recorded (no event log, run.json unchanged): free space before the next restart",
                runfile.path, err.strerror, session, rid,
            )
            return _inert(project, name, rid, None, ranks, config, settings, session)
        if not exists:  # nothing recorded yet: remove what this init created
            _remove_empty(run_dir, project_dir if made_project else None)
        why = " (nothing was recorded; the run folder was removed)" if not exists else ""
        raise type(err)(err.errno, f"nblog: cannot write {runfile.path}: {err.strerror}{why}") from None
    return _make_run(project, name, rid, run_dir, ranks, runfile, config, settings, host, env,
                     job_id, job_source, session=session, step_start=entry["step_start"])


#: errno of a full disk or an exhausted quota
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def _remove_empty(run_dir: str, project_dir: str | None) -> None:
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


def _highest_step(run: Run) -> int | None:
    """The highest step this session logged by any call (None: none yet), for run.json's
    ``last_step`` at the end of the session: :meth:`Run._current_step` (steps 10 then 3
    leave 10; timers, text and media count). Read at the end, never per point."""
    return run._current_step()


def _written_step(writer: Writer | None, step: int | None) -> int | None:
    """The highest step ``writer`` has written to the event log (at least ``step``, the
    first step it is writing now; None: none yet), for run.json's ``last_step`` while the
    session runs: the training thread's steps (:func:`_highest_step`) run ahead of the
    writer thread, and a killed process would leave run.json claiming steps the log lacks."""
    high = writer.written_step if writer is not None else None
    if step is None:
        return high
    return step if high is None or step > high else high


def _make_run(project: str, name: str | None, rid: str, run_dir: str, ranks: RankInfo, runfile: RunFile | None,
              config: dict, settings: Settings, host: str, env: Mapping[str, str], job_id: str | None,
              job_source: str | None, session: int | None = None,
              step_start: int | None = None) -> Run:
    is_logging = ranks.rank == 0
    if session is None:
        session, step_start = _rank_session(run_dir, ranks.rank, launch_identity(env))
    t0 = time.monotonic_ns()
    wall0 = time.time()

    def make_writer(run: Run) -> Writer:
        header = {
            "format_version": F.FORMAT_VERSION,
            "nblog_version": __version__,
            "project": project,
            "run_id": rid,
            "rank": run.rank,
            "local_rank": run.local_rank,
            "world_size": run.world_size,
            "session": run.session,
            "host": host,
            "pid": os.getpid(),
            "wall_start": wall0,
            "monotonic_start_ns": run._t0,
            "launcher": ranks.launcher,
            "job_id": job_id,
            "job_id_source": job_source,
            "restart_counts": {k: env[k] for k in _RESTART_VARS if k in env},
        }
        on_first = on_progress = None
        if runfile is not None:
            written = [None, 0]  # the last step and summary change in run.json: rewritten when they move

            def on_first(step: int, _s: int = run.session) -> None:
                writer = holder[0]
                written[0] = last = _written_step(writer, step)
                changes = writer.summary_changes if writer is not None else 0
                extra = {"summary": writer.summary()} if changes else {}  # folded before this call
                runfile.update_session(_s, first_step=step, last_step=last, updated=time.time(), **extra)
                written[1] = changes

            def on_progress(_s: int = run.session) -> bool:
                writer = holder[0]
                step = _written_step(writer, None)
                changes = writer.summary_changes if writer is not None else written[1]
                if (step is None or step == written[0]) and changes == written[1]:
                    return False
                extra = {"summary": writer.summary()} if changes != written[1] else {}
                if step is not None and step != written[0]:
                    extra["last_step"] = step
                runfile.update_session(_s, updated=time.time(), **extra)
                written[0] = step if step is not None else written[0]
                written[1] = changes
                return True
        holder: list = [None]  # the writer, for on_progress (its thread may call before this returns)
        holder[0] = writer = Writer(
            os.path.join(run_dir, event_file_name(run.rank, run.session)),
            header,
            flush_interval=settings.flush_interval,
            heartbeat_interval=settings.heartbeat_s,
            progress_interval=settings.progress_s,
            on_first_step=on_first,
            on_progress=on_progress,
            media_sink=run._media_sink,
            buffers=(run._points, run._texts, run._media, run._tag_defs),
            summary=runfile.data.get("summary", {}) if runfile is not None else None,
        )
        return writer

    run = Run(
        project=project, name=name, run_id=rid, run_dir=run_dir, rank=ranks.rank,
        local_rank=ranks.local_rank, world_size=ranks.world_size,
        session=session, config=config, is_logging=is_logging,
        timing_all_ranks=settings.timing_all_ranks, strict=settings.strict,
        make_writer=make_writer, step_start=step_start or 0,
        scalars_all_ranks=settings.scalars_all_ranks,
    )
    run._t0 = t0
    run._runfile = runfile
    if runfile is not None:
        def finalize(status: str, reason: str | None, _s: int = run.session) -> None:
            try:
                writer = run._writer
                runfile.update_session(
                    _s, status=status, end=time.time(), end_reason=reason, last_step=_highest_step(run),
                    **({"summary": writer.summary()} if writer is not None and writer.summary_changes else {}),
                    duration_s=round((time.monotonic_ns() - run._t0) / 1e9, 3),
                    **({"failure": run._failure} if run._failure is not None else {}),
                )
            except OSError as err:
                log.warning("nblog: cannot update %s: %s", runfile.path, err)
        run._finalize = finalize
    if is_logging or settings.scalars_all_ranks:  # the other ranks' scalars need their writer too
        run._ensure_writer()
    if ranks.local_rank == 0 and settings.system:
        from ..system._system import start_sampler

        start_sampler(run, settings.system, settings.system_interval, env)
    if settings.console or "nblog.write._console" in sys.modules:  # a new init ends an earlier capture
        from ._console import capture

        capture(run if settings.console else None, settings.flush_interval)
    _lifecycle.register(run)
    return run
