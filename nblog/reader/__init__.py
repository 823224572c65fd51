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
(:func:`diff_runs`); hangs (:func:`hang_report`, ``nb hang``); querying many runs (:func:`parse_where`, :func:`select_runs`); tag
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
    "default_root": ("._runs.catalog", "default_root"),
    "list_runs": ("._runs.catalog", "list_runs"),
    "list_runs_meta": ("._runs.catalog", "list_runs_meta"),
    "latest_run": ("._runs.catalog", "latest_run"),
    "resolve_run": ("._runs.catalog", "resolve_run"),
    "run_summary": ("._runs.catalog", "run_summary"),
    "run_status": ("._runs.catalog", "run_status"),
    # where a run is: one definition each of the last step and of a live writer
    "STALE_AFTER_S": ("._runfiles.progress", "STALE_AFTER_S"),
    "log_last_step": ("._runfiles.progress", "log_last_step"),
    "session_last_step": ("._runfiles.progress", "session_last_step"),
    "session_steps": ("._runfiles.progress", "session_steps"),
    "latest_step": ("._runfiles.progress", "latest_step"),
    "rank_last_step": ("._runfiles.progress", "rank_last_step"),
    "writer_alive": ("._runfiles.progress", "writer_alive"),
    "process_alive": ("._runfiles.progress", "process_alive"),
    "this_host": ("._runfiles.progress", "this_host"),
    "tag_summaries": ("._views.tag_stats", "tag_summaries"),
    # a rank's files
    "event_files": ("._runfiles.rankfiles", "event_files"),
    "ranks_with_logs": ("._runfiles.rankfiles", "ranks_with_logs"),
    "RankFiles": ("._runfiles.rankfiles", "RankFiles"),
    "follow": ("._runfiles.rankfiles", "follow"),
    "read_on": ("._runfiles.rankfiles", "read_on"),
    "read_all": ("._runfiles.rankfiles", "read_all"),
    "hide_thresholds": ("._runfiles.rankfiles", "hide_thresholds"),
    "KIND_CODES": ("._runfiles.rankfiles", "KIND_CODES"),
    "WINDOW": ("._runfiles.rankfiles", "WINDOW"),
    "LogFile": ("._file.logfile", "LogFile"),
    "Delta": ("._file.logfile", "Delta"),
    "read_header": ("nblog.format._walk", "read_header"),
    # frames, live series, following
    "RunReader": ("._views.reader", "RunReader"),
    "POINT_SCHEMA": ("._views.reader", "POINT_SCHEMA"),
    "TEXT_SCHEMA": ("._views.reader", "TEXT_SCHEMA"),
    "SYSTEM_SCHEMA": ("._views.reader", "SYSTEM_SCHEMA"),
    "FAILURE_SCHEMA": ("._views.reader", "FAILURE_SCHEMA"),
    "ALERT_SCHEMA": ("._views.reader", "ALERT_SCHEMA"),
    "LiveRun": ("._views.live", "LiveRun"),
    "Envelope": ("._runfiles.envelopes", "Envelope"),
    "read_envelopes": ("._runfiles.envelopes", "read_envelopes"),
    "envelope_file_name": ("nblog.format._filenames", "envelope_file_name"),
    "Series": ("._views.live", "Series"),
    "Follower": ("._views.tail", "Follower"),
    "Event": ("._views.tail", "Event"),
    "KINDS": ("._views.tail", "KINDS"),
    "DEFAULT_KINDS": ("._views.tail", "DEFAULT_KINDS"),
    "ConsoleLogs": ("._runfiles.console", "ConsoleLogs"),
    "ConsoleLine": ("._runfiles.console", "ConsoleLine"),
    # media
    "MEDIA_SCHEMA": ("._runfiles.media", "MEDIA_SCHEMA"),
    "HISTOGRAM_SCHEMA": ("._runfiles.media", "HISTOGRAM_SCHEMA"),
    "decode_histogram": ("nblog.media._media_encode", "decode_histogram"),
    # selection
    "tag_matcher": ("._views.select", "tag_matcher"),
    "tag_set": ("._views.select", "tag_set"),
    # reports
    "overview": ("._answers.overview", "overview"),
    "tag_table": ("._answers.overview", "tag_table"),
    "timer_report": ("._answers.overview", "timer_report"),
    "failure_line": ("._answers.overview", "failure_line"),
    "provenance_lines": ("._answers.overview", "provenance_lines"),
    "TRACEBACK_LINES": ("._answers.overview", "TRACEBACK_LINES"),
    "timer_frames": ("._answers.overview", "timer_frames"),
    "failed_ranks": ("._answers.overview", "failed_ranks"),
    "StragglerRule": ("._views.stragglers", "StragglerRule"),
    "TimerFrames": ("._views.stragglers", "TimerFrames"),
    "straggler_frames": ("._views.stragglers", "straggler_frames"),
    "STRAGGLER_SPREAD": ("._views.stragglers", "STRAGGLER_SPREAD"),
    "STRAGGLER_FLOOR_S": ("._views.stragglers", "STRAGGLER_FLOOR_S"),
    "STRAGGLER_WARMUP_STEPS": ("._views.stragglers", "STRAGGLER_WARMUP_STEPS"),
    # watching
    "Watcher": ("._views.watch", "Watcher"),
    # hangs: each rank's stacks and collective record, the ranks the others wait for
    "HANG_KEYS": ("._hang", "HANG_KEYS"),
    "hang_report": ("._hang", "hang_report"),
    "hang_summary": ("._hang", "hang_summary"),
    "hang_where": ("._hang", "hang_where"),
    "read_hang_dump": ("._hang", "read_hang_dump"),
    "WatchOptions": ("._views.watch", "WatchOptions"),
    # export
    "read_frame": ("._runs.export", "read_frame"),
    "read_frames": ("._runs.export", "read_frames"),
    "write_frame": ("._runs.export", "write_frame"),
    "write_frames": ("._runs.export", "write_frames"),
    "write_output": ("._runs.export", "write_output"),
    "export_root": ("._runs.export", "export_root"),
    "format_for": ("._runs.export", "format_for"),
    "refuse_linked_folders": ("._runs.export", "refuse_linked_folders"),
    "writing_to": ("._runs.export", "writing_to"),
    "EXPORT_KINDS": ("._runs.export", "EXPORT_KINDS"),
    "FORMATS": ("._runs.export", "FORMATS"),
    # many runs, diff
    "QueryError": ("._runs.query", "QueryError"),
    "RunsTable": ("._runs.query", "RunsTable"),
    "parse_where": ("._runs.query", "parse_where"),
    "select_runs": ("._runs.query", "select"),
    "group_runs": ("._runs.query", "groups"),
    "diff_runs": ("._runs.diff", "diff_runs"),
    # messages
    "plural": ("._answers.words", "plural"),
}

__all__ = sorted(_NAMES)

TYPE_CHECKING = False
if TYPE_CHECKING:  # the names for the type checker; at run time __getattr__ imports each on first
    # use (F401 is off for this file in pyproject.toml: these are re-exports)
    from nblog.format._filenames import envelope_file_name
    from nblog.format._walk import read_header
    from nblog.media._media_encode import decode_histogram

    from ._answers.overview import (
        TRACEBACK_LINES,
        failed_ranks,
        failure_line,
        overview,
        provenance_lines,
        tag_table,
        timer_frames,
        timer_report,
    )
    from ._answers.words import plural
    from ._file.logfile import Delta, LogFile
    from ._hang import HANG_KEYS, hang_report, hang_summary, hang_where, read_hang_dump
    from ._runfiles.console import ConsoleLine, ConsoleLogs
    from ._runfiles.envelopes import Envelope, read_envelopes
    from ._runfiles.media import HISTOGRAM_SCHEMA, MEDIA_SCHEMA
    from ._runfiles.progress import (
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
    from ._runfiles.rankfiles import (
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
    from ._runs.catalog import (
        default_root,
        latest_run,
        list_runs,
        list_runs_meta,
        resolve_run,
        run_status,
        run_summary,
    )
    from ._runs.diff import diff_runs
    from ._runs.export import (
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
    from ._runs.query import (
        QueryError,
        RunsTable,
        parse_where,
    )
    from ._runs.query import (
        groups as group_runs,
    )
    from ._runs.query import (
        select as select_runs,
    )
    from ._views.live import LiveRun, Series
    from ._views.reader import (
        ALERT_SCHEMA,
        FAILURE_SCHEMA,
        POINT_SCHEMA,
        SYSTEM_SCHEMA,
        TEXT_SCHEMA,
        RunReader,
    )
    from ._views.select import tag_matcher, tag_set
    from ._views.stragglers import (
        STRAGGLER_FLOOR_S,
        STRAGGLER_SPREAD,
        STRAGGLER_WARMUP_STEPS,
        StragglerRule,
        TimerFrames,
        straggler_frames,
    )
    from ._views.tag_stats import tag_summaries
    from ._views.tail import DEFAULT_KINDS, KINDS, Event, Follower
    from ._views.watch import Watcher, WatchOptions
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
