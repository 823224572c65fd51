"""What the framework doors share: nb's own init arguments, config merging, a run-id file."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

from .. import _log as log
from ..format._filesafety import write_atomic
from ..format._names import check_name
from ..format._runfile import to_json_config
from ..write._run import Run
from ..write._runid import derive_run_id, shared_job_id
from ..write._settings import resolve

RUN_ID_FILE = "nb_run_id"  # beside a framework's checkpoint: the id of the run that wrote it


def init_kwargs(
    project: str,
    run_name: str | None,
    run_id: str | None,
    resume: str | None,
    root: str | os.PathLike | None,
    timing_all_ranks: bool,
    system: bool | list[str] | tuple[str, ...],
) -> dict:
    """The keyword arguments every door passes on to :func:`nblog.init` (config apart)."""
    return {
        "project": project,
        "run_name": run_name,
        "run_id": run_id,
        "resume": resume,
        "root": root,
        "timing_all_ranks": timing_all_ranks,
        "system": system,
    }


def agent_run_id(project: str, run_name: str | None, env: Mapping[str, str]) -> str | None:
    """A run id every worker of one single-machine elastic launch derives alike, or None.

    ``accelerate launch`` (and ``torchrun --master-port P`` without ``--rdzv-id``) use a
    static rendezvous: ``TORCHELASTIC_RUN_ID`` is the literal ``none``, so nb finds no
    shared job id and only rank 0 would log. On one machine all workers are children of
    the same launcher process: its pid and start time (``/proc/<pid>/stat``) name the
    launch. A torchrun restart (same launcher) gets the same id: a new session.
    None when another id source exists (``NB_RUN_ID``, a job id) or the job spans
    several machines (their launchers differ: use Slurm or ``--rdzv-id``).
    """
    if env.get("NB_RUN_ID") or shared_job_id(env)[0] is not None:
        return None
    if env.get("TORCHELASTIC_RUN_ID", "").strip() != "none":
        return None
    if not env.get("WORLD_SIZE") or env.get("LOCAL_WORLD_SIZE") != env.get("WORLD_SIZE"):
        return None
    ppid = os.getppid()
    try:
        with open(f"/proc/{ppid}/stat", encoding="ascii") as f:
            started = f.read().rsplit(")", 1)[1].split()[19]  # field 22: start time in ticks
    except (OSError, IndexError):
        started = "?"
    return derive_run_id(project, run_name, f"launcher-{socket.gethostname()}-{ppid}-{started}")


def planned_run(kw: Mapping, env: Mapping[str, str]) -> tuple[str, str | None] | None:
    """Where :func:`nblog.init` with the keyword arguments ``kw`` in ``env`` puts the run,
    without opening it: ``(root, run id)``, the id None when init would draw a random
    one (rank 0 without ``run_id``, ``$NB_RUN_ID`` or a shared job id); None with
    ``mode="disabled"`` (no folder at all).

    The same resolution init makes (root: ``root=``, ``$NB_DIR``, ``./nb_runs``; id: the
    explicit one, then the one derived from the shared job id), so a door can answer
    "where will the run be" (Lightning's ``log_dir``, ``version``) and create nothing.

    Raises:
        ValueError: an argument or ``NB_*`` variable init would refuse too.
    """
    settings = resolve(
        env, root=None if kw.get("root") is None else os.fspath(kw["root"]), mode=kw.get("mode"),
        strict=kw.get("strict"), resume=kw.get("resume"), run_id=kw.get("run_id"),
        flush_interval=kw.get("flush_interval"), system=kw.get("system", True),
        system_interval=kw.get("system_interval"), timing_all_ranks=bool(kw.get("timing_all_ranks")),
    )
    if settings.mode == "disabled":
        return None
    rid = settings.run_id
    if rid is None:
        job_id = shared_job_id(env)[0]
        if job_id is not None:
            rid = derive_run_id(kw.get("project", "default"), kw.get("run_name"), job_id)
    return settings.root, rid


def as_config(config: object) -> dict:
    """``config`` (mapping, Namespace, dataclass, ``to_dict()`` object, None) as a JSON dict."""
    return to_json_config(config)


def merge_config(run: Run, values: Mapping) -> None:
    """Add ``values`` to the config of a run that is already open: :meth:`Run.update_config`.

    The frameworks hand hyper-parameters over after the run started (Lightning's
    ``log_hyperparams``, Accelerate's ``store_init_configuration``, ``add_hparams``).
    Never raises (but ``NB_STRICT=1`` raises for values of a kind no config takes):
    a failure warns once.
    """
    run.update_config(values)


def write_run_id(folder: str, run: Run | None) -> None:
    """Write ``run.id`` into ``folder/nb_run_id`` (logging rank only); never raises."""
    if run is None or not run.is_logging or not run.id:
        return
    try:
        os.makedirs(folder, exist_ok=True)
        write_atomic(os.path.join(folder, RUN_ID_FILE), (run.id + "\n").encode("utf-8"))
    except OSError as err:
        log.warning("nblog: could not write the run id beside the checkpoint in %s: %s", folder, err)


def read_run_id(folder: str | os.PathLike | None) -> str | None:
    """The run id saved in ``folder/nb_run_id`` by :func:`write_run_id`, or None."""
    if not folder:
        return None
    try:
        with open(os.path.join(os.fspath(folder), RUN_ID_FILE), encoding="utf-8") as f:
            rid = f.read(512).strip()
        check_name(rid, "run_id")
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return rid
