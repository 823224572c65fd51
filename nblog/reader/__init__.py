"""Reading runs: the public reader library that every ``nb`` command is a thin layer over.

Finding runs (:func:`list_runs`, :func:`resolve_run`, :func:`run_summary`); where a run
is (:func:`log_last_step`, :func:`session_last_step`, :func:`latest_step`,
:func:`writer_alive`: one definition each of the last step and of a live writer); a rank's
session files in order, read incrementally (``_rankfiles``, ``_logfile``); whole frames
(:class:`RunReader`); live in-memory series (:class:`LiveRun`); min/max envelopes of
long runs from the writer's sidecars (:func:`read_envelopes`); following one rank
(:class:`Follower`, ``nb tail``) and console logs (:class:`ConsoleLogs`, ``nb logs``);
media (:meth:`RunReader.media`, :func:`decode_histogram`); reports (:func:`overview`,
:func:`timer_report`, :func:`timer_frames`, the one straggler rule
:func:`straggler_frames`); watching (:class:`Watcher`); export
(:func:`read_frame`, :func:`write_frame`, :func:`export_root`; every output file's
``cannot write PATH: REASON``: :func:`write_output`, :func:`writing_to`); comparing runs
(:func:`diff_runs`); querying many runs (:func:`parse_where`, :func:`select_runs`); tag
selection (:func:`tag_matcher`); how a count reads in a message (:func:`plural`).
Importing TensorBoard event files writes runs: it is ``nblog.tensorboard``'s, above the
reader and the write path.

Every name is imported on first use (PEP 562 ``__getattr__``): ``import nblog`` and
``import nblog.reader`` load no reader module, numpy or polars. The modules behind the
names are private; their docstrings say what each reads.
"""

from __future__ import annotations

import importlib

#: Public name -> (private module of this package, or an absolute one; its attribute).
_NAMES: dict[str, tuple[str, str]] = {
    # finding runs
    "default_root": ("._catalog", "default_root"),
    "list_runs": ("._catalog", "list_runs"),
    "list_runs_meta": ("._catalog", "list_runs_meta"),
    "latest_run": ("._catalog", "latest_run"),
    "resolve_run": ("._catalog", "resolve_run"),
    "run_summary": ("._catalog", "run_summary"),
    "run_status": ("._catalog", "run_status"),
    # where a run is: one definition each of the last step and of a live writer
    "STALE_AFTER_S": ("._progress", "STALE_AFTER_S"),
    "log_last_step": ("._progress", "log_last_step"),
    "session_last_step": ("._progress", "session_last_step"),
    "session_steps": ("._progress", "session_steps"),
    "latest_step": ("._progress", "latest_step"),
    "rank_last_step": ("._progress", "rank_last_step"),
    "writer_alive": ("._progress", "writer_alive"),
    "process_alive": ("._progress", "process_alive"),
    "this_host": ("._progress", "this_host"),
    "tag_summaries": ("._tag_summary", "tag_summaries"),
    # a rank's files
    "event_files": ("._rankfiles", "event_files"),
    "ranks_with_logs": ("._rankfiles", "ranks_with_logs"),
    "RankFiles": ("._rankfiles", "RankFiles"),
    "follow": ("._rankfiles", "follow"),
    "read_on": ("._rankfiles", "read_on"),
    "read_all": ("._rankfiles", "read_all"),
    "hide_thresholds": ("._rankfiles", "hide_thresholds"),
    "KIND_CODES": ("._rankfiles", "KIND_CODES"),
    "WINDOW": ("._rankfiles", "WINDOW"),
    "LogFile": ("._logfile", "LogFile"),
    "Delta": ("._logfile", "Delta"),
    "read_header": ("nblog.format._walk", "read_header"),
    # frames, live series, following
    "RunReader": ("._reader", "RunReader"),
    "POINT_SCHEMA": ("._reader", "POINT_SCHEMA"),
    "TEXT_SCHEMA": ("._reader", "TEXT_SCHEMA"),
    "SYSTEM_SCHEMA": ("._reader", "SYSTEM_SCHEMA"),
    "FAILURE_SCHEMA": ("._reader", "FAILURE_SCHEMA"),
    "ALERT_SCHEMA": ("._reader", "ALERT_SCHEMA"),
    "LiveRun": ("._live", "LiveRun"),
    "Envelope": ("._envelope_read", "Envelope"),
    "read_envelopes": ("._envelope_read", "read_envelopes"),
    "envelope_file_name": ("nblog.format._filenames", "envelope_file_name"),
    "Series": ("._live", "Series"),
    "Follower": ("._tail", "Follower"),
    "Event": ("._tail", "Event"),
    "KINDS": ("._tail", "KINDS"),
    "DEFAULT_KINDS": ("._tail", "DEFAULT_KINDS"),
    "ConsoleLogs": ("._console_read", "ConsoleLogs"),
    "ConsoleLine": ("._console_read", "ConsoleLine"),
    # media
    "MEDIA_SCHEMA": ("._media_read", "MEDIA_SCHEMA"),
    "HISTOGRAM_SCHEMA": ("._media_read", "HISTOGRAM_SCHEMA"),
    "decode_histogram": ("nblog.media._media_encode", "decode_histogram"),
    # selection
    "tag_matcher": ("._select", "tag_matcher"),
    "tag_set": ("._select", "tag_set"),
    # reports
    "overview": ("._summary", "overview"),
    "tag_table": ("._summary", "tag_table"),
    "timer_report": ("._summary", "timer_report"),
    "failure_line": ("._summary", "failure_line"),
    "provenance_lines": ("._summary", "provenance_lines"),
    "TRACEBACK_LINES": ("._summary", "TRACEBACK_LINES"),
    "timer_frames": ("._summary", "timer_frames"),
    "failed_ranks": ("._summary", "failed_ranks"),
    "StragglerRule": ("._stragglers", "StragglerRule"),
    "TimerFrames": ("._stragglers", "TimerFrames"),
    "straggler_frames": ("._stragglers", "straggler_frames"),
    "STRAGGLER_SPREAD": ("._stragglers", "STRAGGLER_SPREAD"),
    "STRAGGLER_FLOOR_S": ("._stragglers", "STRAGGLER_FLOOR_S"),
    "STRAGGLER_WARMUP_STEPS": ("._stragglers", "STRAGGLER_WARMUP_STEPS"),
    # watching
    "Watcher": ("._watch", "Watcher"),
    "WatchOptions": ("._watch", "WatchOptions"),
    # export
    "read_frame": ("._export", "read_frame"),
    "read_frames": ("._export", "read_frames"),
    "write_frame": ("._export", "write_frame"),
    "write_frames": ("._export", "write_frames"),
    "write_output": ("._export", "write_output"),
    "export_root": ("._export", "export_root"),
    "format_for": ("._export", "format_for"),
    "refuse_linked_folders": ("._export", "refuse_linked_folders"),
    "writing_to": ("._export", "writing_to"),
    "EXPORT_KINDS": ("._export", "EXPORT_KINDS"),
    "FORMATS": ("._export", "FORMATS"),
    # many runs, diff
    "QueryError": ("._runs_query", "QueryError"),
    "RunsTable": ("._runs_query", "RunsTable"),
    "parse_where": ("._runs_query", "parse_where"),
    "select_runs": ("._runs_query", "select"),
    "group_runs": ("._runs_query", "groups"),
    "diff_runs": ("._diff", "diff_runs"),
    # messages
    "plural": ("._words", "plural"),
}

__all__ = sorted(_NAMES)

TYPE_CHECKING = False
if TYPE_CHECKING:  # the names for the type checker; at run time __getattr__ imports each on first
    # use (F401 is off for this file in pyproject.toml: these are re-exports)
    from nblog.format._filenames import envelope_file_name
    from nblog.format._walk import read_header
    from nblog.media._media_encode import decode_histogram

    from ._catalog import (
        default_root,
        latest_run,
        list_runs,
        list_runs_meta,
        resolve_run,
        run_status,
        run_summary,
    )
    from ._console_read import ConsoleLine, ConsoleLogs
    from ._diff import diff_runs
    from ._envelope_read import Envelope, read_envelopes
    from ._export import (
        EXPORT_KINDS,
        FORMATS,
        export_root,
        format_for,
        read_frame,
        read_frames,
        refuse_linked_folders,
        write_frame,
        write_frames,
        write_output,
        writing_to,
    )
    from ._live import LiveRun, Series
    from ._logfile import Delta, LogFile
    from ._media_read import HISTOGRAM_SCHEMA, MEDIA_SCHEMA
    from ._progress import (
        STALE_AFTER_S,
        latest_step,
        log_last_step,
        process_alive,
        rank_last_step,
        session_last_step,
        session_steps,
        this_host,
        writer_alive,
    )
    from ._rankfiles import (
        KIND_CODES,
        WINDOW,
        RankFiles,
        event_files,
        follow,
        hide_thresholds,
        ranks_with_logs,
        read_all,
        read_on,
    )
    from ._reader import (
        ALERT_SCHEMA,
        FAILURE_SCHEMA,
        POINT_SCHEMA,
        SYSTEM_SCHEMA,
        TEXT_SCHEMA,
        RunReader,
    )
    from ._runs_query import (
        QueryError,
        RunsTable,
        parse_where,
    )
    from ._runs_query import (
        groups as group_runs,
    )
    from ._runs_query import (
        select as select_runs,
    )
    from ._select import tag_matcher, tag_set
    from ._stragglers import (
        STRAGGLER_FLOOR_S,
        STRAGGLER_SPREAD,
        STRAGGLER_WARMUP_STEPS,
        StragglerRule,
        TimerFrames,
        straggler_frames,
    )
    from ._summary import (
        TRACEBACK_LINES,
        failed_ranks,
        failure_line,
        overview,
        provenance_lines,
        tag_table,
        timer_frames,
        timer_report,
    )
    from ._tag_summary import tag_summaries
    from ._tail import DEFAULT_KINDS, KINDS, Event, Follower
    from ._watch import Watcher, WatchOptions
    from ._words import plural
del TYPE_CHECKING  # not a name of nblog.reader's


def __getattr__(name: str) -> object:
    """Import the module behind a public name on first use and cache the name here.

    Raises:
        AttributeError: ``name`` is not a public name of ``nblog.reader``.
    """
    try:
        module, attr = _NAMES[name]
    except KeyError:
        raise AttributeError(f"module 'nblog.reader' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module, __name__), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_NAMES))
