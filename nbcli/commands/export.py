"""``nb export [RUN]``: merge rank logs into one frame and write it; or a whole root
as a hive-partitioned Parquet dataset."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from enum import Enum
from types import FrameType
from typing import Annotated

import typer

from nblog.reader.lowlevel import plural

from .._errors import lose_stdout, stdout_closed_at_start
from .._options import MAX_RANK, AllowDamaged, Root, Tags
from .._output import clean, error, info
from .._ranks import missing_rank


class Kind(str, Enum):
    scalars = "scalars"
    timers = "timers"
    system = "system"
    text = "text"


class Format(str, Enum):
    parquet = "parquet"
    csv = "csv"
    ndjson = "ndjson"
    tfevents = "tfevents"


_EXT = {"parquet": ".parquet", "csv": ".csv", "ndjson": ".ndjson"}


def export(
    run: Annotated[
        str | None,
        typer.Argument(metavar="[RUN]",
                       help="The run to export (id, unique prefix, PROJECT/RUN_ID or path). Without RUN, "
                            "every run under the root is written to -o DIR as a hive-partitioned Parquet "
                            "dataset.",
                       show_default=False),
    ] = None,
    output: Annotated[
        str | None,
        typer.Option("--output", "-o", metavar="PATH",
                     help="The file to write ('-' for stdout) [default: RUN_ID-KIND.parquet]; without RUN, "
                          "the dataset folder (required).",
                     show_default=False),
    ] = None,
    all_ranks: Annotated[bool, typer.Option("--all-ranks", help="Merge every rank (a rank column tells them apart).")] = False,
    rank: Annotated[
        int | None,
        typer.Option("--rank", "-r", min=0, max=MAX_RANK, metavar="K", help="Export rank K [default: 0].",
                     show_default=False),
    ] = None,
    tags: Tags = None,
    kind: Annotated[Kind, typer.Option("--kind", "-k", help="What to export.")] = Kind.scalars,
    fmt: Annotated[
        Format | None,
        typer.Option("--format", "-F", help="File format [default: from the suffix of -o, else parquet]; "
                     "tfevents: TensorBoard event files of every rank under -o DIR (one folder per rank).",
                     show_default=False),
    ] = None,
    include_hidden: Annotated[
        bool,
        typer.Option("--include-hidden",
                     help="Also points hidden by a later session's restart (adds a boolean column 'hidden')."),
    ] = False,
    project: Annotated[
        str | None,
        typer.Option("--project", "-p", metavar="PROJECT", help="Without RUN: only this project.",
                     show_default=False),
    ] = None,
    root: Root = None,
    allow_damaged: AllowDamaged = False,
) -> None:
    """Merge a run's rank logs into one Polars frame and write it as Parquet, CSV or NDJSON.

    Columns: rank, session, step, tag, value, wall_time, active_time (scalars, timers:
    value in seconds); rank, session, step, tag, text, wall_time (text); hostname, rank,
    session, wall_time, step, tag, value (system). NDJSON writes NaN and infinities as the
    strings "nan", "inf", "-inf".

    -o FILE is written to a temp file and renamed (a replaced file keeps its mode); a
    symlink is followed, and a device, FIFO or /dev/fd/N is written in place, as cp does.

    --format tfevents -o DIR writes TensorBoard event files instead (DIR/rank_<k>: every
    rank's scalars and timers as float64 values, rank 0's text, images, audio and
    histograms, each with its own step and wall time, hidden points left out; with
    nb's marks so that nb import tensorboard DIR brings back one run with its ranks,
    sessions and timers); --rank, --tag, --kind and --include-hidden do not apply to
    it. Needs the tensorboard package.
    """
    from nblog.reader.lowlevel import format_for

    if all_ranks and rank is not None:
        raise typer.BadParameter("--all-ranks and --rank exclude each other", param_hint="--rank")
    if run is None:
        _export_root(output, fmt, tags, kind, include_hidden, project, root, all_ranks, rank)
        return
    if project is not None:
        raise typer.BadParameter("--project only applies without RUN (a whole-root export)", param_hint="--project")
    if fmt is Format.tfevents:
        _export_tfevents(run, output, rank, tags, kind, include_hidden, root)
        return
    # The frame is made and dropped piece by piece: numpy's advice to use huge pages for
    # each fresh array (on a kernel whose THP defrag is "madvise" a fault compacts memory)
    # made a 100M-point export take 51 s instead of 30 here, for nothing. Effective because the
    # nb command has not imported numpy yet; a value the user set is kept.
    os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")
    from nblog.reader import RunReader, read_frames, write_frames

    if fmt is not None:
        chosen = fmt.value
    elif output is not None and output != "-":
        chosen = format_for(output)
        if chosen is None:
            raise typer.BadParameter(
                f"cannot tell the format from {clean(output)!r}; use a .parquet, .csv or .ndjson suffix "
                "or pass --format",
                param_hint="--output",
            )
    else:
        chosen = "parquet"
    if output == "-" and chosen == "parquet" and sys.stdout.isatty():
        raise typer.BadParameter("refusing to write Parquet to a terminal; redirect stdout or use -o FILE",
                                 param_hint="--output")
    reader = RunReader(run, root)
    no_log = None if all_ranks else missing_rank(reader.dir, rank or 0)
    if no_log is not None:
        error(no_log[0], "pick one of those with --rank K, or pass --all-ranks" if no_log[1] else None)
        raise typer.Exit(1)
    # streamed: piece by piece from the logs into the file, never the whole frame at once
    frames = read_frames(reader, kind.value, tags=tags or None, rank=rank or 0, all_ranks=all_ranks,
                         include_hidden=include_hidden)
    if output == "-":  # a closed pipe (`nb export RUN -o - | head`) is the error boundary's (nbcli._errors)
        if stdout_closed_at_start():  # `nb export RUN -o - >&-`: nowhere to write, exit 1
            lose_stdout()
            return
        sys.stdout.flush()
        with _signals_exit():
            write_frames(frames, sys.stdout.buffer, chosen)
        sys.stdout.buffer.flush()
        return
    path = output or f"{reader.id}-{kind.value}{_EXT[chosen]}"
    _refuse_inside(path, [reader.dir], "the run folder")
    with _signals_exit():
        rows, ranks = write_frames(frames, path, chosen)
    info(f"wrote {plural(rows, 'row')} ({kind.value}, {plural(ranks, 'rank')}) to {path}")


def _export_tfevents(run: str, output: str | None, rank: int | None, tags: list[str] | None, kind: Kind,
                     include_hidden: bool, root: str | None) -> None:
    """``--format tfevents``: every rank's scalars and timers, rank 0's text and media."""
    if output is None or output == "-":
        raise typer.BadParameter("--format tfevents writes a folder: pass -o DIR", param_hint="--output")
    for given, flag in ((rank is not None, "--rank"), (bool(tags), "--tag"), (kind is not Kind.scalars, "--kind"),
                        (include_hidden, "--include-hidden")):
        if given:
            raise typer.BadParameter(f"{flag} does not apply to --format tfevents (it writes every rank and "
                                     "kind, without hidden points)", param_hint=flag)
    if os.path.exists(output) and not os.path.isdir(output):
        raise typer.BadParameter(f"{clean(output)!r} exists and is not a folder", param_hint="--output")
    try:
        import tensorboard as _tb  # noqa: F401
    except ImportError:
        error("writing event files needs the tensorboard package", 'pip install "nblog[tensorboard]"')
        raise typer.Exit(1) from None
    from nblog.tensorboard import export_tfevents

    try:
        folders = export_tfevents(run, output, root=root)
    except FileExistsError as exc:
        error(f"{clean(str(exc.filename))} holds TensorBoard event files already (an earlier export?)",
              "TensorBoard would show both; pass -o with a new folder, or remove the old one first")
        raise typer.Exit(1) from None
    info(f"wrote TensorBoard event files of {plural(len(folders), 'rank')} under {output} "
         f"(tensorboard --logdir {output})")


def _export_root(output: str | None, fmt: Format | None, tags: list[str] | None, kind: Kind, include_hidden: bool,
                 project: str | None, root: str | None, all_ranks: bool, rank: int | None) -> None:
    from nblog.reader import default_root, export_root

    if output is None or output == "-":
        raise typer.BadParameter("without RUN, -o DIR names the folder of the Parquet dataset", param_hint="--output")
    if fmt is not None and fmt is not Format.parquet:
        raise typer.BadParameter("a whole-root export is a Parquet dataset", param_hint="--format")
    if rank is not None:
        raise typer.BadParameter("a whole-root export writes every rank; drop --rank", param_hint="--rank")
    root = root or default_root()
    if not os.path.isdir(root):
        raise FileNotFoundError(f"the root {os.path.abspath(root)} does not exist (pass --root DIR or set NB_DIR)")
    if os.path.exists(output) and not os.path.isdir(output):
        raise typer.BadParameter(f"{clean(output)!r} exists and is not a folder", param_hint="--output")
    from nblog.reader import list_runs

    run_dirs = [row["path"] for row in list_runs(root)]
    _refuse_inside(output, run_dirs, "the run folder")
    here = os.path.realpath(output)
    for folder in {os.path.realpath(root), *(os.path.realpath(os.path.dirname(d)) for d in run_dirs)}:
        if here == folder:
            raise typer.BadParameter(f"{clean(output)!r} is the root or one of its project folders; the dataset "
                                     "would mix with the runs: name a folder outside them", param_hint="--output")
    total = {"runs": 0, "rows": 0, "files": 0}

    def progress(res: dict) -> None:
        total["runs"] += 1
        total["rows"] += res["rows"]
        total["files"] += len(res["files"])
        info(f"{res['project']}/{res['run']}: {plural(res['rows'], 'row')}, {plural(len(res['ranks']), 'rank')}")

    with _signals_exit():
        done = export_root(root, output, kind.value, project=project, tags=tags or None,
                           include_hidden=include_hidden, on_run=progress)
    if not done and project is not None:
        from .._ls import _no_such_project

        _no_such_project(project, root)
        raise typer.Exit(1)
    info(f"wrote {plural(total['rows'], 'row')} of {plural(total['runs'], 'run')} in {plural(total['files'], 'file')} "
         f"under {output} "
         "(hive layout project=/run=/rank=)")


def _refuse_inside(path: str, run_dirs: list[str], what: str) -> None:
    """Refuse an output ``path`` that is, or lies inside, one of ``run_dirs`` (symlinks
    resolved): writing there would replace a run's own files.

    Raises:
        typer.BadParameter: ``path`` is inside a run folder.
    """
    here = os.path.realpath(path)
    for d in run_dirs:
        folder = os.path.realpath(d)
        if here == folder or here.startswith(folder.rstrip(os.sep) + os.sep):
            raise typer.BadParameter(f"{clean(path)!r} is inside {what} {clean(d)}; writing there would destroy "
                                     "the run's own files: name a path outside it", param_hint="--output")


@contextlib.contextmanager
def _signals_exit() -> Iterator[None]:
    """While the export writes, SIGTERM and SIGHUP raise ``SystemExit(128 + signum)``
    (as SIGINT raises KeyboardInterrupt), so the temp file's cleanup runs; the old
    handlers are put back after. A signal's exit status wins over the error it caused
    inside Polars. Only in the main thread (where handlers can be set)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []

    def handler(signum: int, _frame: FrameType | None) -> None:
        got.append(signum)
        raise SystemExit(128 + signum)

    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    except BaseException:
        if got:
            raise SystemExit(128 + got[0]) from None
        raise
    finally:
        for s, h in old.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)


def register(app: typer.Typer) -> None:
    app.command("export")(export)
