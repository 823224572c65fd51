"""A Run that writes, put together for ``init`` once its folder and session are known.

:func:`make_run` gives the Run a writer factory (the writer, made at the first need on
ranks other than 0, opens ``events.r<rank>.s<session>.log`` with its header: versions,
run id, ranks, host, pid, clocks, launcher, job id, restart counts). On rank 0 it
keeps the session's entry in run.json current: the first step and the last step
*written* (never ahead of the event log, so a ``kill -9`` cannot leave run.json
claiming steps the log lacks) and the summary while it runs, then status, end, last
step, duration and failure at ``finish``. It starts the system sampler (local rank 0),
console capture, and registers the run for the exit, exception, signal and fork hooks
(``_lifecycle``).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping

from .. import _log as log
from .._version import __version__
from ..format import _format as F
from ..format._filenames import event_file_name
from ..format._runfile import RunFile
from . import _lifecycle
from ._launch import RankInfo
from ._run import Run
from ._settings import Settings
from ._writer import Writer

_RESTART_VARS = ("TORCHELASTIC_RESTART_COUNT", "SLURM_RESTART_COUNT")


def restart_counts(env: Mapping[str, str]) -> dict[str, str]:
    """The launcher's restart counters of this launch (run.json's session, the log header)."""
    return {k: env[k] for k in _RESTART_VARS if k in env}


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


def make_run(*, project: str, name: str | None, rid: str, run_dir: str, ranks: RankInfo, runfile: RunFile | None,
             config: dict, settings: Settings, host: str, env: Mapping[str, str], job_id: str | None,
             job_source: str | None, session: int, step_start: int) -> Run:
    """The Run of this rank's ``session`` in ``run_dir``, its writer made at once where
    the rank logs (rank 0; every rank with ``scalars_all_ranks``), else at the first
    timer, failure or alert. ``runfile``: rank 0's run.json (None elsewhere);
    ``step_start``: where the ``add_scalar`` counter starts."""
    is_logging = ranks.rank == 0
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
            "restart_counts": restart_counts(env),
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
            # rank 0 folds the run summary (run.json's); another rank that logs scalars
            # (scalars_all_ranks) folds one of its own, never written anywhere, for what
            # the fold feeds: its envelope sidecar (viewers draw its band without its points)
            summary=runfile.data.get("summary", {}) if runfile is not None
            else ({} if settings.scalars_all_ranks else None),
        )
        return writer

    run = Run(
        project=project, name=name, run_id=rid, run_dir=run_dir, rank=ranks.rank,
        local_rank=ranks.local_rank, world_size=ranks.world_size,
        session=session, config=config, is_logging=is_logging,
        timing_all_ranks=settings.timing_all_ranks, strict=settings.strict,
        make_writer=make_writer, step_start=step_start,
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

