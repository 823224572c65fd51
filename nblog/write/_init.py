"""``nblog.init``: settings, ranks, the run id, run.json and the session.

``init`` resolves the settings (``_settings``), finds the ranks (``_launch``) and the
run id (explicit, derived from a shared job id, or random on rank 0). Rank 0 makes the
run folder (``_rundir``), adds its session to run.json (new, or resumed from the old
one); another rank waits for rank 0's session of its launch (``_rundir``) and takes
the session after its own files. :func:`nblog.write._make_run.make_run` then puts the
Run together with its writer, run.json's updates, the sampler and the exit hooks.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Mapping

from .. import _log as log
from .._version import __version__
from ..format import _format as F
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
from ._rundir import WAIT_FIRST_S as WAIT_FIRST_S
from ._rundir import WAIT_REREAD_S as WAIT_REREAD_S
from ._rundir import make_project_dir, make_run_dir, remove_empty, wait_for_rank0
from ._rundir import wait_for as _wait_for  # noqa: F401  (the wait for rank 0 is also named here, as before)
from ._runid import derive_run_id, random_run_id, shared_job_id
from ._session import load_run_json_for_resume
from ._settings import Settings, resolve

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
    hang_s: float | str | None = None,
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
        hang_s: seconds without a new step after which this rank writes its threads'
            stacks and its Flight Recorder record into the run folder
            (``stacks.r<rank>.s<session>.<n>.json``, read by ``nb hang``); None
            (``$NB_HANG_S``, else automatic: 5x the longest of the last 64 step gaps,
            at least 120 s, armed by the first step); 0 or "off": never. ``$NB_HANG_SIGNAL``
            (default USR1, "off") names the signal that writes a dump on demand;
            ``$NB_HANG_FR=0`` leaves torch's Flight Recorder alone (by default nb sets
            ``TORCH_FR_BUFFER_SIZE=2000`` when unset and no process group exists yet).

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
    hang = _hang_config(env, hang_s)
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
    chosen = _choose_run_id(project, run_name, settings, ranks, job_id)
    if chosen is None:  # a non-zero rank that cannot learn the run id
        return _inert(project, run_name, "", None, ranks, config_json, settings)
    rid, how = chosen
    project_dir = os.path.join(settings.root, project)
    host = hostname(env)
    if ranks.rank == 0:
        run = _open_rank0(
            project, run_name, rid, how, job_id, job_source, project_dir, ranks, config_json,
            settings, host, env,
        )
        _start_provenance(run, settings, ranks, env, host, job_id, job_source)
        _start_hang(run, host, hang, env)
        return run
    run_dir = os.path.join(project_dir, rid)
    launch = launch_identity(env)
    meta = wait_for_rank0(run_dir, settings.wait_s, launch, rank=ranks.rank, world_size=ranks.world_size)
    if meta is None:  # warned
        return _inert(project, run_name, rid, None, ranks, config_json, settings)
    session, step_start = _rank_session(run_dir, ranks.rank, launch, meta)
    # imported here, not with nblog: `import nblog` (the nb command) needs none of it
    from ._make_run import make_run

    run = make_run(
        project=project, name=run_name, rid=rid, run_dir=run_dir, ranks=ranks, runfile=None,
        config=config_json, settings=settings, host=host, env=env, job_id=job_id,
        job_source=job_source, session=session, step_start=step_start,
    )
    _start_provenance(run, settings, ranks, env, host, job_id, job_source)
    _start_hang(run, host, hang, env)
    return run


def _hang_config(env: Mapping[str, str], hang_s: float | str | None) -> tuple[float | None, int | None, bool]:
    """``(period, signal, fr)`` of the hang watchdog from ``hang_s`` and ``$NB_HANG_*``.
    Raises ValueError for a bad value."""
    from ._hang import parse_hang_s, parse_signal

    if hang_s is not None:
        period = parse_hang_s(hang_s, "hang_s")
    else:
        period = parse_hang_s(env.get("NB_HANG_S", ""), "NB_HANG_S")
    signum = parse_signal(env.get("NB_HANG_SIGNAL"))
    fr = env.get("NB_HANG_FR", "").strip().lower() not in ("0", "off", "false", "no")
    return period, signum, fr


def _start_hang(run: Run, host: str, hang: tuple[float | None, int | None, bool], env: Mapping[str, str]) -> None:
    """Start this rank's hang watchdog (``_hang``), stopped by ``finish``; never raises."""
    period, signum, fr = hang
    if run.dir is None or (period == 0 and signum is None):
        return
    try:
        from . import _hang

        if fr:
            state = _hang.enable_flight_recorder(env)
            if state == "late" and run.rank == 0:
                log.info("nblog: torch.distributed was initialised before nb.init; hang dumps have the Flight "
                         "Recorder record only if TORCH_FR_BUFFER_SIZE was set (call nb.init first)")
        dog = _hang.Watchdog(run.dir, run.rank, run.session, host, run._current_step,
                             hang_s=period, signum=signum, fr=fr)
        dog.start()
        run._on_finish.append(dog.stop)
        run._hang = dog  # type: ignore[attr-defined]
    except Exception as exc:
        log.warning("nblog: hang watchdog not started: %r", exc)


def _choose_run_id(project: str, run_name: str | None, settings: Settings, ranks: RankInfo,
                   job_id: str | None) -> tuple[str, str] | None:
    """``(run id, how)``: the explicit id ("explicit"), else one derived from the shared
    job id ("derived"), else on rank 0 a random one ("random"); None on another rank
    without a shared job id (warned where it would have sampled system metrics).
    Raises ``ValueError`` for ``resume="must"`` on rank 0 without an id to continue."""
    if settings.run_id is not None:
        return settings.run_id, "explicit"
    if job_id is not None:
        return derive_run_id(project, run_name, job_id), "derived"
    if ranks.rank == 0:
        if settings.resume == "must":  # a random id never names a run to continue
            raise ValueError(
                "nblog: resume='must' needs the id of the run to continue: pass run_id=, set "
                "NB_RUN_ID, or run under a launcher with a shared job id (Slurm, torchrun --rdzv-id)"
            )
        return random_run_id(run_name), "random"
    if ranks.local_rank == 0 and settings.system:
        log.warning(
            "nblog: rank %d cannot learn the run id (no shared job id), so this machine's "
            "system metrics are not recorded. Run under Slurm, give torchrun "
            "--rdzv-backend c10d --rdzv-endpoint HOST:PORT --rdzv-id ID, or set NB_RUN_ID.",
            ranks.rank,
        )
    return None


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


def _open_rank0(project: str, name: str | None, rid: str, how: str, job_id: str | None, job_source: str | None,
                project_dir: str, ranks: RankInfo, config: dict, settings: Settings, host: str,
                env: Mapping[str, str]) -> Run:
    from ._make_run import make_run, restart_counts  # as in init

    made_project = make_project_dir(project_dir)
    run_dir, rid, exists = make_run_dir(project_dir, rid, how, resume=settings.resume, name=name,
                                        job_id=job_id, job_source=job_source)
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
        "restart_counts": restart_counts(env),
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
            remove_empty(run_dir, project_dir if made_project else None)
        why = " (nothing was recorded; the run folder was removed)" if not exists else ""
        raise type(err)(err.errno, f"nblog: cannot write {runfile.path}: {err.strerror}{why}") from None
    return make_run(project=project, name=name, rid=rid, run_dir=run_dir, ranks=ranks, runfile=runfile,
                    config=config, settings=settings, host=host, env=env, job_id=job_id,
                    job_source=job_source, session=session, step_start=entry["step_start"])


#: errno of a full disk or an exhausted quota
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


