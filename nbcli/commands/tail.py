"""``nb tail RUN``: the last events of one rank, and with ``-f`` new ones as they come."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Annotated

import typer

from nblog.reader.lowlevel import plural

from .. import _damage as damage
from .._options import (
    MAX_COUNT,
    AllowDamaged,
    FollowTimeout,
    Json,
    PollInterval,
    Rank,
    Root,
    RunArg,
    Tags,
)
from .._output import Output, Styled, clean, emit_json_line, error, fmt_value, info
from .._ranks import missing_rank

if TYPE_CHECKING:
    from nblog.reader import Event

_KIND_STYLE = {"scalar": "green", "timer": "magenta", "text": "cyan", "media": "blue", "system": "yellow"}


#: Characters of a text event the human output shows; --json prints all of it.
TEXT_SHOWN = 500


def _cut(text: str) -> str:
    """``text``, or its first :data:`TEXT_SHOWN` characters and a note of how many more."""
    if len(text) <= TEXT_SHOWN:
        return text
    return f"{text[:TEXT_SHOWN]}\u2026 ({plural(len(text) - TEXT_SHOWN, 'more character')}; --json prints all)"


def _line(ev: Event) -> list[Styled]:
    from datetime import datetime

    when = datetime.fromtimestamp(ev.wall_time).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    if ev.kind == "text":
        value = clean(_cut(ev.text or ""))
    elif ev.kind == "media":
        value = clean(json.dumps(ev.meta, ensure_ascii=False, default=str))
    elif ev.kind == "timer":
        value = fmt_value(ev.value) + " s"
    else:
        value = fmt_value(ev.value)
    return [
        Styled(when, "dim"),
        Styled(f"s{ev.session}", "dim"),
        Styled(str(ev.step), "cyan"),
        Styled(ev.kind, _KIND_STYLE.get(ev.kind, "")),
        Styled(clean(ev.tag), "bold"),
        Styled(value),
    ]


def tail(
    run: RunArg,
    rank: Rank = 0,
    lines: Annotated[
        int, typer.Option("--lines", "-n", min=0, max=MAX_COUNT, metavar="N", help="Print the last N events first.")
    ] = 10,
    follow: Annotated[
        bool,
        typer.Option("--follow", "-f",
                     help="Keep printing new events as they are written, across new session files "
                          "(resumes); wait for the run if it does not exist yet. Stop with Ctrl-C."),
    ] = False,
    tags: Tags = None,
    system: Annotated[bool, typer.Option("--system", help="Include system metrics (left out by default).")] = False,
    timeout: FollowTimeout = None,
    interval: PollInterval = 0.25,
    root: Root = None,
    allow_damaged: AllowDamaged = False,
    as_json: Json = False,
) -> None:
    """Print the last N events (scalars, timers, text, media) of one rank, oldest first.

    Each line: time, session, step, kind, tag, value (tab-separated when piped). With
    --json, one JSON object per line (JSON Lines) with keys rank, session, step, kind,
    tag, wall_time, value, text, meta; NaN and infinities are the strings "nan", "inf",
    "-inf". Only bytes appended since the last poll are read. A rank with no events
    (yet, or none matching --tag) prints a note on stderr and exits 0.
    """
    from nblog.reader import Follower
    from nblog.reader.lowlevel import DEFAULT_KINDS

    kinds = DEFAULT_KINDS + (("system",) if system else ())
    follower = Follower(run, root, rank=rank, kinds=kinds, tags=tags or None)
    if follower.resolve() is None:
        from nblog.reader import default_root, resolve_run

        if not follow:
            resolve_run(run, root)  # raises RunNotFoundError, saying where it looked
        info(f"waiting for run {run} under {os.path.abspath(root or default_root())} ...")
    out = None if as_json else Output()

    def emit(events: Iterable[Event]) -> int:
        n = 0
        for ev in events:
            n += 1
            if out is None:
                emit_json_line(ev.to_json())
            else:
                out.line(_line(ev))
        return n

    first = emit(follower.stream(last=lines))  # streamed: memory never grows with -n
    if follower.dir is not None and not follower.sessions():
        message, present = missing_rank(follower.dir, rank) or ("", [])
        if not follow:
            error(message, "pick one of those with --rank K, or add -f to wait for this rank" if present else
                  "add -f to wait for it")
            raise typer.Exit(1)
        info(f"waiting for {message.replace(' has no event log in ', ': no event log yet in ')} ...")
    elif follower.dir is not None and lines and not first:
        # an empty output says why: not an error (a run that has just started has none yet)
        where = f"rank {rank} of run {os.path.basename(follower.dir)}"
        if damage.lost():
            note = f"no readable events in {where}: the damaged bytes reported above held them"
            info(note + ("; waiting for new ones ..." if follow else ""))
        else:
            note = f"no events of {where} match --tag {' '.join(tags)}" if tags else f"no events in {where} yet"
            info(note + ("; waiting for new ones ..." if follow else " (add -f to wait for them)"))
    if not follow:
        return
    try:
        for batch in follower.follow(interval, timeout=timeout):
            emit(batch)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def register(app: typer.Typer) -> None:
    app.command("tail")(tail)
