"""``nb logs RUN``: each rank's console (stdout and stderr), merged by time."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Annotated

import typer

from nblog.reader.lowlevel import plural

from .._options import MAX_COUNT, MAX_RANK, FollowTimeout, Json, PollInterval, Root, RunArg
from .._output import Output, Styled, clean, emit_json_line, error, info
from .._ranks import rank_ranges

if TYPE_CHECKING:
    from nblog.reader import ConsoleLine

_STREAM = {"stdout": ("out", ""), "stderr": ("err", "red"), "nb": ("nb", "yellow")}
_HINT = "capture it with nb.init(..., console=True) or NB_CONSOLE=1 in the job's environment"


def _fields(line: ConsoleLine) -> list[Styled]:
    from datetime import datetime

    when = datetime.fromtimestamp(line.wall_time).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    label, style = _STREAM[line.stream]
    return [
        Styled(when, "dim"),
        Styled(f"r{line.rank}", "bold cyan"),
        Styled("-" if line.step is None else str(line.step), "dim"),
        Styled(label, style),
        Styled(clean(line.text)),  # logged data: never a control sequence on the terminal
    ]


class _Printer:
    """Prints batches of lines: Rich on a terminal, tab-separated when piped, JSON Lines."""

    def __init__(self, as_json: bool) -> None:
        self.json = as_json
        self.out = None if as_json else Output()

    def __call__(self, lines: Iterable[ConsoleLine]) -> int:
        n = 0
        out = self.out
        if out is None:  # --json
            for line in lines:
                emit_json_line(line.to_json())
                n += 1
            return n
        if out.rich:
            for line in lines:
                out.line(_fields(line))
                n += 1
            return n
        chunk: list[str] = []
        for line in lines:
            chunk.append("\t".join(p.text for p in _fields(line)) + "\n")
            n += 1
            if len(chunk) >= 4096:
                sys.stdout.write("".join(chunk))
                chunk.clear()
        sys.stdout.write("".join(chunk))
        sys.stdout.flush()
        return n


def logs(
    run: RunArg,
    rank: Annotated[
        int | None,
        typer.Option("--rank", "-r", min=0, max=MAX_RANK, metavar="K", help="The rank to print [default: 0].",
                     show_default=False),
    ] = None,
    all_ranks: Annotated[
        bool, typer.Option("--all-ranks", "-a", help="Every rank, merged by time, each line with its rank.")
    ] = False,
    lines: Annotated[
        int | None,
        typer.Option("--lines", "-n", min=0, max=MAX_COUNT, metavar="N",
                     help="Print only the last N lines (after --grep) [default: all].", show_default=False),
    ] = None,
    grep: Annotated[
        str | None,
        typer.Option("--grep", "-g", metavar="REGEX",
                     help="Only lines whose text matches this Python regular expression (re.search).",
                     show_default=False),
    ] = None,
    follow: Annotated[
        bool,
        typer.Option("--follow", "-f",
                     help="Keep printing new lines as they are written, of new ranks and sessions too; "
                          "wait for the run if it does not exist yet. Stop with Ctrl-C."),
    ] = False,
    timeout: FollowTimeout = None,
    interval: PollInterval = 0.25,
    root: Root = None,
    as_json: Json = False,
) -> None:
    """Print the console (stdout and stderr) that ranks captured with
    nb.init(console=True) or NB_CONSOLE=1, oldest first, merged by time across ranks.

    Each line: time, rank (r3), step at that time (- before the first), stream (out,
    err, or nb for nb's own notes such as lines the file missed), text
    (tab-separated when piped; control characters shown as escapes such as \\x1b).
    With --json, one JSON object per line with keys rank, session, wall_time, step,
    stream, text.
    """
    from nblog.reader import ConsoleLogs, default_root, resolve_run

    if rank is not None and all_ranks:
        raise typer.BadParameter("--all-ranks and --rank exclude each other", param_hint="--rank")
    if grep is not None:
        try:
            re.compile(grep)
        except re.error as err:
            raise typer.BadParameter(f"{grep!r} is not a regular expression: {err}", param_hint="--grep") from None
    wanted = None if all_ranks else [0 if rank is None else rank]
    reader = ConsoleLogs(run, root, ranks=wanted, grep=grep)
    if reader.resolve() is None:
        if not follow:
            resolve_run(run, root)  # raises RunNotFoundError, saying where it looked
        info(f"waiting for run {run} under {os.path.abspath(root or default_root())} ...")
    emit = _Printer(as_json)
    emit(reader.read(last=lines))
    if reader.dir is not None and not reader.files():
        name = os.path.basename(reader.dir)
        present = reader.all_ranks()
        if wanted is None or not present:
            message = f"run {name} has no console log"
            hint = _HINT
        else:
            message = f"rank {wanted[0]} has no console log in run {name} (ranks with one: {rank_ranges(present)})"
            hint = "pick one of those with --rank K, or --all-ranks"
        if not follow:
            error(message, hint)
            raise typer.Exit(1)
        info(f"{message}; waiting for one ...")
    if reader.skipped:
        info(f"{plural(reader.skipped, 'malformed line')} skipped")
    if not follow:
        return
    try:
        for batch in reader.follow(interval, timeout=timeout):
            emit(batch)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def register(app: typer.Typer) -> None:
    app.command("logs")(logs)
