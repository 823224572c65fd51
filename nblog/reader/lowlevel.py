"""Building blocks of the reader, for tools that go below :mod:`nblog.reader`: public and
kept stable, but what most users need is in ``nblog.reader``.

==========================  ============================================================
One event log               :class:`LogFile` (read incrementally; :class:`Delta` what one
                            read added), :func:`read_header`, :func:`log_last_step`
A rank's files              :class:`RankFiles` (a rank's logs session by session),
                            :func:`event_files`, :func:`ranks_with_logs`, :func:`follow`,
                            :func:`read_on`, :func:`read_all`, :data:`WINDOW`,
                            :data:`KIND_CODES`, :func:`hide_thresholds` (resume hiding)
Steps and liveness          :func:`session_last_step`, :func:`session_steps`,
                            :func:`rank_last_step`, :func:`process_alive`,
                            :func:`this_host`, :data:`STALE_AFTER_S`
Frame schemas               :data:`POINT_SCHEMA`, :data:`TEXT_SCHEMA`,
                            :data:`SYSTEM_SCHEMA`, :data:`FAILURE_SCHEMA`,
                            :data:`ALERT_SCHEMA`, :data:`MEDIA_SCHEMA`,
                            :data:`HISTOGRAM_SCHEMA`
Runs                        :func:`list_runs_meta`, :func:`tag_stats` (last/min/max per tag),
                            :func:`envelope_file_name`
Following                   :data:`KINDS`, :data:`DEFAULT_KINDS` (event kinds of ``nb tail``)
Report parts                :func:`tag_table`, :func:`failure_line`,
                            :func:`provenance_lines`, :data:`TRACEBACK_LINES`,
                            :func:`timer_frames`, :func:`failed_ranks`,
                            :data:`STRAGGLER_SPREAD`, :data:`STRAGGLER_FLOOR_S`,
                            :data:`STRAGGLER_WARMUP_STEPS`
Writing outputs             :func:`read_frame`, :func:`write_frame`, :func:`write_output`,
                            :func:`writing_to` (``cannot write PATH: REASON``),
                            :func:`format_for`, :func:`refuse_linked_folders`,
                            :data:`EXPORT_KINDS`, :data:`FORMATS`
Tags and messages           :func:`tag_set`, :func:`plural` (how a count reads)
Hang dumps                  :func:`read_hang_dump` (one rank's), :func:`hang_where` (where a
                            stack stands), :data:`HANG_KEYS` (``nb hang --json``)
==========================  ============================================================

Every name is imported on first use, as in ``nblog.reader``.
"""

from __future__ import annotations

from ._lazy import lazy_attributes

#: Public name -> (module, relative to nblog.reader or absolute; its attribute).
_NAMES: dict[str, tuple[str, str]] = {
    # one event log
    "LogFile": ("._file.logfile", "LogFile"),
    "Delta": ("._file.logfile", "Delta"),
    "read_header": ("nblog.format._walk", "read_header"),
    "log_last_step": ("._runfiles.progress", "log_last_step"),
    # a rank's files
    "RankFiles": ("._runfiles.rankfiles", "RankFiles"),
    "event_files": ("._runfiles.rankfiles", "event_files"),
    "ranks_with_logs": ("._runfiles.rankfiles", "ranks_with_logs"),
    "follow": ("._runfiles.rankfiles", "follow"),
    "read_on": ("._runfiles.rankfiles", "read_on"),
    "read_all": ("._runfiles.rankfiles", "read_all"),
    "hide_thresholds": ("._runfiles.rankfiles", "hide_thresholds"),
    "KIND_CODES": ("._runfiles.rankfiles", "KIND_CODES"),
    "WINDOW": ("._runfiles.rankfiles", "WINDOW"),
    # steps and liveness
    "STALE_AFTER_S": ("._runfiles.progress", "STALE_AFTER_S"),
    "session_last_step": ("._runfiles.progress", "session_last_step"),
    "session_steps": ("._runfiles.progress", "session_steps"),
    "rank_last_step": ("._runfiles.progress", "rank_last_step"),
    "process_alive": ("._runfiles.progress", "process_alive"),
    "this_host": ("._runfiles.progress", "this_host"),
    # frame schemas
    "POINT_SCHEMA": ("._views.reader", "POINT_SCHEMA"),
    "TEXT_SCHEMA": ("._views.reader", "TEXT_SCHEMA"),
    "SYSTEM_SCHEMA": ("._views.reader", "SYSTEM_SCHEMA"),
    "FAILURE_SCHEMA": ("._views.reader", "FAILURE_SCHEMA"),
    "ALERT_SCHEMA": ("._views.reader", "ALERT_SCHEMA"),
    "MEDIA_SCHEMA": ("._runfiles.media", "MEDIA_SCHEMA"),
    "HISTOGRAM_SCHEMA": ("._runfiles.media", "HISTOGRAM_SCHEMA"),
    # runs
    "list_runs_meta": ("._runs.catalog", "list_runs_meta"),
    "tag_stats": ("._views.tag_stats", "tag_stats"),
    "envelope_file_name": ("nblog.format._filenames", "envelope_file_name"),
    # following
    "KINDS": ("._views.tail", "KINDS"),
    "DEFAULT_KINDS": ("._views.tail", "DEFAULT_KINDS"),
    # report parts
    "tag_table": ("._answers.overview", "tag_table"),
    "failure_line": ("._runfiles.failures", "failure_line"),
    "provenance_lines": ("._answers.overview", "provenance_lines"),
    "TRACEBACK_LINES": ("._answers.overview", "TRACEBACK_LINES"),
    "timer_frames": ("._views.stragglers", "timer_frames"),
    "failed_ranks": ("._runfiles.failures", "failed_ranks"),
    "STRAGGLER_SPREAD": ("._views.stragglers", "STRAGGLER_SPREAD"),
    "STRAGGLER_FLOOR_S": ("._views.stragglers", "STRAGGLER_FLOOR_S"),
    "STRAGGLER_WARMUP_STEPS": ("._views.stragglers", "STRAGGLER_WARMUP_STEPS"),
    # writing outputs
    "read_frame": ("._runs.export", "read_frame"),
    "write_frame": ("._runs.export", "write_frame"),
    "write_output": ("._runs.export", "write_output"),
    "writing_to": ("._runs.export", "writing_to"),
    "format_for": ("._runs.export", "format_for"),
    "refuse_linked_folders": ("._runs.export", "refuse_linked_folders"),
    "EXPORT_KINDS": ("._runs.export", "EXPORT_KINDS"),
    "FORMATS": ("._runs.export", "FORMATS"),
    # tags and messages
    "tag_set": ("._file.select", "tag_set"),
    "plural": ("._file.words", "plural"),
    "HANG_KEYS": ("._runfiles.hang", "HANG_KEYS"),
    "hang_where": ("._runfiles.hang", "hang_where"),
    "read_hang_dump": ("._runfiles.hang", "read_hang_dump"),
}

__all__ = sorted(_NAMES)

TYPE_CHECKING = False
if TYPE_CHECKING:  # the names for the type checker; __getattr__ imports each on first use
    # (F401 is off for this file in pyproject.toml: these are re-exports)
    from nblog.format._filenames import envelope_file_name
    from nblog.format._walk import read_header

    from ._answers.overview import TRACEBACK_LINES, provenance_lines, tag_table
    from ._file.logfile import Delta, LogFile
    from ._file.select import tag_set
    from ._file.words import plural
    from ._runfiles.failures import failed_ranks, failure_line
    from ._runfiles.hang import HANG_KEYS, hang_where, read_hang_dump
    from ._runfiles.media import HISTOGRAM_SCHEMA, MEDIA_SCHEMA
    from ._runfiles.progress import (
        STALE_AFTER_S,
        log_last_step,
        process_alive,
        rank_last_step,
        session_last_step,
        session_steps,
        this_host,
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
    from ._runs.catalog import list_runs_meta
    from ._runs.export import (
        EXPORT_KINDS,
        FORMATS,
        format_for,
        read_frame,
        refuse_linked_folders,
        write_frame,
        write_output,
        writing_to,
    )
    from ._views.reader import (
        ALERT_SCHEMA,
        FAILURE_SCHEMA,
        POINT_SCHEMA,
        SYSTEM_SCHEMA,
        TEXT_SCHEMA,
    )
    from ._views.stragglers import (
        STRAGGLER_FLOOR_S,
        STRAGGLER_SPREAD,
        STRAGGLER_WARMUP_STEPS,
        timer_frames,
    )
    from ._views.tag_stats import tag_stats
    from ._views.tail import DEFAULT_KINDS, KINDS
del TYPE_CHECKING  # not a name of nblog.reader.lowlevel's

__getattr__, __dir__ = lazy_attributes(__name__, _NAMES, globals(), package="nblog.reader")
