"""Reading runs: the public reader library that every ``nb`` command is a thin layer over.

The names here are what a user of runs needs, about thirty; the building blocks for tools
(one log file, a rank's files, windows, schemas, the CLI's output helpers) are in
:mod:`nblog.reader.lowlevel`.

==========================  ============================================================
Finding runs                :func:`default_root`, :func:`list_runs` (the ``nb ls`` rows),
                            :func:`resolve_run`, :func:`latest_run`, :func:`run_row`
                            (one run's ``nb ls`` row), :func:`run_status`
Where a run is              :func:`latest_step` (the one definition of a run's last step),
                            :func:`writer_alive` (of a live writer)
Reading one run             :class:`RunReader` (Polars frames, every rank, full
                            resolution), :func:`read_envelopes` / :class:`Envelope`
                            (min/max of long runs from the writer's sidecars),
                            :func:`decode_histogram`
Live and following          :class:`LiveRun` / :class:`Series` (in-memory series kept up to
                            date), :class:`Follower` / :class:`Event` (one rank, ``nb
                            tail``), :class:`ConsoleLogs` / :class:`ConsoleLine` (``nb logs``)
Reports                     :func:`overview` (``nb show``), :func:`timer_report` (``nb
                            timers``), :func:`straggler_frames` / :class:`StragglerRule` /
                            :class:`TimerFrames` (the one straggler rule)
Watching                    :class:`Watcher`, :class:`WatchOptions` (``nb watch``)
Export                      :func:`read_frames`, :func:`write_frames`, :func:`export_root`
                            (``nb export``)
Many runs                   :func:`select_runs`, :func:`group_runs`, :func:`parse_where`,
                            :class:`RunsTable`, :class:`QueryError` (``nb ls --where``),
                            :func:`diff_runs` (``nb diff``)
Tags                        :func:`tag_matcher` (the one tag-selection rule)
Hangs                       :func:`hang_report` (``nb hang``), :func:`hang_summary` (its
                            line in ``nb show`` and the report)
==========================  ============================================================

Where the code is (private packages, each module's docstring says what it reads):
``_file`` one event log (frames, columns, Arrow); ``_runfiles`` one run's rank logs by
session and the sidecars beside them; ``_views`` views of one run; ``_runs`` many runs;
``_answers`` what the CLI formats. Importing TensorBoard event files writes runs: it is
``nblog.tensorboard``'s, above the reader and the write path.

Every name is imported on first use (PEP 562 ``__getattr__``): ``import nblog`` and
``import nblog.reader`` load no reader module, numpy or polars.
"""

from __future__ import annotations

from ._lazy import lazy_attributes

#: Public name -> (private module of this package, or an absolute one; its attribute).
_NAMES: dict[str, tuple[str, str]] = {
    # finding runs
    "default_root": ("._runfiles.locate", "default_root"),
    "list_runs": ("._runs.catalog", "list_runs"),
    "latest_run": ("._runs.catalog", "latest_run"),
    "resolve_run": ("._runfiles.locate", "resolve_run"),
    "run_row": ("._runs.catalog", "run_row"),
    "run_status": ("._runfiles.progress", "run_status"),
    # where a run is
    "latest_step": ("._runfiles.progress", "latest_step"),
    "writer_alive": ("._runfiles.progress", "writer_alive"),
    # reading one run
    "RunReader": ("._views.reader", "RunReader"),
    "Envelope": ("._runfiles.envelopes", "Envelope"),
    "read_envelopes": ("._runfiles.envelopes", "read_envelopes"),
    "decode_histogram": ("nblog.media._media_encode", "decode_histogram"),
    # live and following
    "LiveRun": ("._views.live", "LiveRun"),
    "Series": ("._views.live", "Series"),
    "Follower": ("._views.tail", "Follower"),
    "Event": ("._views.tail", "Event"),
    "ConsoleLogs": ("._runfiles.console", "ConsoleLogs"),
    "ConsoleLine": ("._runfiles.console", "ConsoleLine"),
    # reports
    "overview": ("._answers.overview", "overview"),
    "timer_report": ("._answers.overview", "timer_report"),
    "StragglerRule": ("._views.stragglers", "StragglerRule"),
    "TimerFrames": ("._views.stragglers", "TimerFrames"),
    "straggler_frames": ("._views.stragglers", "straggler_frames"),
    # watching
    "Watcher": ("._views.watch", "Watcher"),
    # hangs: each rank's stacks and collective record, the ranks the others wait for
    "hang_report": ("._runfiles.hang", "hang_report"),
    "hang_summary": ("._runfiles.hang", "hang_summary"),
    "WatchOptions": ("._views.watch", "WatchOptions"),
    # export
    "read_frames": ("._runs.export", "read_frames"),
    "write_frames": ("._runs.export", "write_frames"),
    "export_root": ("._runs.export", "export_root"),
    # many runs
    "QueryError": ("._runs.query", "QueryError"),
    "RunsTable": ("._runs.query", "RunsTable"),
    "parse_where": ("._runs.query", "parse_where"),
    "select_runs": ("._runs.query", "select_runs"),
    "group_runs": ("._runs.query", "group_runs"),
    "diff_runs": ("._runs.diff", "diff_runs"),
    # tags
    "tag_matcher": ("._file.select", "tag_matcher"),
}

__all__ = sorted(_NAMES)

TYPE_CHECKING = False
if TYPE_CHECKING:  # the names for the type checker; at run time __getattr__ imports each on first
    # use (F401 is off for this file in pyproject.toml: these are re-exports)
    from nblog.media._media_encode import decode_histogram

    from ._answers.overview import overview, timer_report
    from ._file.select import tag_matcher
    from ._runfiles.console import ConsoleLine, ConsoleLogs
    from ._runfiles.envelopes import Envelope, read_envelopes
    from ._runfiles.hang import hang_report, hang_summary
    from ._runfiles.locate import default_root, resolve_run
    from ._runfiles.progress import latest_step, run_status, writer_alive
    from ._runs.catalog import latest_run, list_runs, run_row
    from ._runs.diff import diff_runs
    from ._runs.export import export_root, read_frames, write_frames
    from ._runs.query import QueryError, RunsTable, group_runs, parse_where, select_runs
    from ._views.live import LiveRun, Series
    from ._views.reader import RunReader
    from ._views.stragglers import StragglerRule, TimerFrames, straggler_frames
    from ._views.tail import Event, Follower
    from ._views.watch import Watcher, WatchOptions
del TYPE_CHECKING  # not a name of nblog.reader's

__getattr__, __dir__ = lazy_attributes(__name__, _NAMES, globals())
