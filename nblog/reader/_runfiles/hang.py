"""Reads a run's hang dumps: who is stalled, where, and which rank the others wait for.

The writer (``nblog/write/_hang.py``) leaves, per rank and session,
``stacks.r<R>.s<S>.<n>.jsonl`` (a summary line, then the full stacks and Flight
Recorder record) and ``stacks.r<R>.s<S>.moved.json`` when the rank moved again after
a stall (``man 5 nb-format``, HANG DUMPS). :func:`hang_report` reads only the summary
line of each rank's newest dump (thousands of ranks in well under a second) and
answers as ``nb hang --json`` prints (:data:`HANG_KEYS`):

- **stalled**: some rank's newest dump is a stall dump not followed by its moved note;
- **groups**: ranks grouped by identical main-thread stack (as LLNL's STAT does),
  each with where it stands: ``all_reduce ← train_step (train.py:57)``;
- **suspects**: the ranks the others wait for, by the first rule that names any:
  1. the Flight Recorder: in the process group most ranks recorded, the ranks whose
     last collective's sequence number is below the highest one the others entered
     (they never entered it), else the ranks that called a different op at that number;
  2. ranks of the run (its ``world_size``) that wrote no dump while others stalled;
  3. ranks whose stack is not the one most ranks share.

Imports the standard library only. torch's own Flight Recorder analysis
(``torch.distributed.flight_recorder``) reads full per-rank traces with stack traces
through its own builder; it does not take gloo's all-"scheduled" states or nb's
summaries, so the rules above are nb's own.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter

from ...format._filenames import HANG_PREFIX, RUN_JSON, parse_hang_file_name

__all__ = ["HANG_KEYS", "HANG_SETTLE_S", "HangRule", "hang_report", "hang_summary", "hang_where", "read_hang_dump"]

#: the top-level keys of :func:`hang_report`'s answer, in order (``nb hang --json``)
HANG_KEYS = ("stalled", "since_s", "ranks", "groups", "suspects", "reason")

_LIB_MARKS = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep, os.sep + "lib" + os.sep + "python")


def _is_library(path: str) -> bool:
    return any(m in path for m in _LIB_MARKS) or path.startswith("<")


def _frame_text(frame: list) -> str:
    file, line, func = frame
    return f"{func} ({os.path.basename(str(file))}:{line})"


def hang_where(stack: list | None) -> str:
    """Where a main-thread stack (``[[file, line, func], ...]``, outermost first)
    stands, in a few words: the innermost function, then the innermost frame of the
    program itself (not the standard library or an installed package):
    ``all_reduce ← train_step (train.py:57)``. ``"?"`` for no stack."""
    if not stack:
        return "?"
    inner = stack[-1]
    own = next((f for f in reversed(stack) if not _is_library(str(f[0]))), None)
    if own is None or own is inner:
        return _frame_text(inner)
    return f"{inner[2]} ← {_frame_text(own)}"


def read_hang_dump(path: str, full: bool = False) -> dict:
    """One hang dump: its summary line (a dict: kind, rank, session, host, step, wall,
    since_wall, main, last, ...), with ``full``: merged with the second line (threads,
    fr). Raises OSError or ValueError for an unreadable or damaged file."""
    with open(path, "rb") as f:
        head = json.loads(f.readline())
        if full:
            rest = f.readline()
            if rest.strip():
                head.update(json.loads(rest))
    if not isinstance(head, dict):
        raise ValueError(f"{path}: not a hang dump")
    return head


def _world_size(run_dir: str) -> int | None:
    try:
        with open(os.path.join(run_dir, RUN_JSON), "rb") as f:
            meta = json.load(f)
        sessions = meta.get("sessions") or []
        ws = (sessions[-1].get("world_size") if sessions else None) or meta.get("world_size")
        return int(ws) if ws else None
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def _newest(run_dir: str) -> tuple[dict[int, tuple[int, int, str]], dict[int, tuple[int, str]]]:
    """Per rank: its newest dump ``(session, n, path)`` and moved note ``(session, path)``."""
    dumps: dict[int, tuple[int, int, str]] = {}
    moved: dict[int, tuple[int, str]] = {}
    with os.scandir(run_dir) as it:
        for entry in it:
            name = entry.name
            if not name.startswith(HANG_PREFIX):
                continue
            parsed = parse_hang_file_name(name)
            if parsed is None:
                continue
            rank, session, n = parsed
            if n is None:
                if rank not in moved or session > moved[rank][0]:
                    moved[rank] = (session, entry.path)
            elif rank not in dumps or (session, n) > dumps[rank][:2]:
                dumps[rank] = (session, n, entry.path)
    return dumps, moved


def hang_report(run_dir: str, now: float | None = None) -> dict:
    """What the hang dumps of the run in ``run_dir`` say (``nb hang``): a dict with the
    keys of :data:`HANG_KEYS`:

    ``stalled`` (bool), ``since_s`` (seconds since the stalled ranks' last step moved,
    the earliest; None when not stalled), ``ranks`` (``{"R": {"host", "step",
    "last_collective": {"seq", "op", "state"} | None, "stack": [str], "kind", "dump"}}``,
    keys are decimal strings, stack innermost first), ``groups`` (``[{"ranks", "where"}]``,
    largest first), ``suspects`` (sorted ranks), ``reason`` (one sentence).

    Only each rank's newest session counts. Raises OSError when the folder cannot be
    listed; a damaged dump is skipped (named in ``reason``)."""
    now = time.time() if now is None else now
    dumps, moved = _newest(run_dir)
    ranks: dict[str, dict] = {}
    summaries: dict[int, dict] = {}
    stalled_ranks: list[int] = []
    damaged: list[int] = []
    for rank in sorted(dumps):
        session, n, path = dumps[rank]
        try:
            d = read_hang_dump(path)
        except (OSError, ValueError):
            damaged.append(rank)
            continue
        summaries[rank] = d
        m = moved.get(rank)
        over = False
        if m is not None and m[0] == session:
            try:
                with open(m[1], "rb") as f:
                    note = json.load(f)
                over = isinstance(note, dict) and int(note.get("stall") or 0) >= int(d.get("stall") or 0)
            except (OSError, ValueError, TypeError):
                over = False
        elif m is not None and m[0] > session:
            over = True
        if d.get("kind") == "stall" and not over:
            stalled_ranks.append(rank)
        ranks[str(rank)] = {
            "host": d.get("host"), "step": d.get("step"),
            "last_collective": _last(d.get("last")),
            "stack": [_frame_text(f) for f in reversed(d.get("main") or [])],
            "kind": d.get("kind") if not over else "moved",
            "dump": os.path.basename(path),
        }
    stalled = bool(stalled_ranks)
    since_s = None
    if stalled:
        since = min(float(summaries[r].get("since_wall") or now) for r in stalled_ranks)
        since_s = round(max(0.0, now - since), 3)
    by_stack: dict[tuple, list[int]] = {}
    for rank, d in summaries.items():
        key = tuple(tuple(f) for f in (d.get("main") or []))
        by_stack.setdefault(key, []).append(rank)
    groups = sorted(
        ({"ranks": sorted(rs), "where": hang_where([list(f) for f in key])} for key, rs in by_stack.items()),
        key=lambda g: (-len(g["ranks"]), g["ranks"][0]),
    )
    suspects, reason = _suspects(summaries, groups, stalled, _world_size(run_dir))
    if damaged:
        reason += f"; damaged dumps skipped: ranks {_ranks_text(damaged)}"
    return {"stalled": stalled, "since_s": since_s, "ranks": ranks, "groups": groups,
            "suspects": suspects, "reason": reason}


def _last(colls: object) -> dict | None:
    """The last collective of a summary's ``last`` (``{pg: [seq, op, state]}``): the
    default group's ("default_pg" or pg "0"), else the first group's."""
    if not isinstance(colls, dict) or not colls:
        return None
    key = "default_pg" if "default_pg" in colls else ("0" if "0" in colls else next(iter(colls)))
    seq, op, state = colls[key]
    return {"seq": seq, "op": op, "state": state}


def _ranks_text(ranks: list[int]) -> str:
    return ", ".join(str(r) for r in ranks[:20]) + (f" and {len(ranks) - 20} more" if len(ranks) > 20 else "")


def _suspects(summaries: dict[int, dict], groups: list[dict], stalled: bool,
              world: int | None) -> tuple[list[int], str]:
    if not summaries:
        return [], "no hang dumps in this run"
    if not stalled:
        return [], "no rank is stalled (dumps on request or stalls that ended)"
    # 1. the Flight Recorder, in the process group most ranks recorded
    with_fr = {r: d["last"] for r, d in summaries.items() if isinstance(d.get("last"), dict) and d["last"]}
    if with_fr:
        pg = Counter(k for colls in with_fr.values() for k in colls).most_common(1)[0][0]
        lasts = {r: colls[pg] for r, colls in with_fr.items() if pg in colls}
        top = max(v[0] for v in lasts.values())
        at_top = {r: v for r, v in lasts.items() if v[0] == top}
        op = Counter(v[1] for v in at_top.values()).most_common(1)[0][0]
        behind = sorted(r for r, v in lasts.items() if v[0] < top)
        never = sorted(r for r in with_fr if r not in lasts)
        if behind or never:
            names = sorted(behind + never)
            waiting = len(at_top)
            return names, (f"{_plural(waiting, 'rank')} wait in {op} #{top} of group {pg}; "
                           f"{_who(names)} never entered it")
        odd = sorted(r for r, v in at_top.items() if v[1] != op)
        if odd:
            others = Counter(at_top[r][1] for r in odd)
            return odd, (f"{_who(odd)} called {', '.join(others)} at #{top} of group {pg} "
                         f"where {_plural(len(at_top) - len(odd), 'rank')} called {op}")
    # 2. ranks of the run without a dump
    if world is not None and len(summaries) < world:
        missing = sorted(set(range(world)) - set(summaries))
        if missing:
            return missing, (f"{_plural(len(summaries), 'rank')} stalled; {_who(missing)} wrote no dump "
                             "(not stalled, or dead, or without the watchdog)")
    # 3. stacks
    if len(groups) > 1 and len(groups[0]["ranks"]) > 1:
        odd = sorted(r for g in groups[1:] for r in g["ranks"])
        return odd, (f"{_plural(len(groups[0]['ranks']), 'rank')} at {groups[0]['where']}; "
                     f"{_who(odd)} elsewhere")
    return [], f"{_plural(len(summaries), 'rank')} stalled at {groups[0]['where']}; no rank stands out"


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def _who(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + _ranks_text(ranks)


#: seconds without a new dump after which a stall's dumps count as all there (``nb watch``)
HANG_SETTLE_S = 3.0


class HangRule:
    """``nb watch``'s ``hang`` rule: one alert per stall, naming the suspects.

    A stall is reported once its dumps have settled: every rank of the run wrote one,
    or none came for :data:`HANG_SETTLE_S` seconds (so the suspects are not named from
    the first rank's dump alone). It is reported again only after the run moved on (a
    poll that finds it not stalled) and stalled anew."""

    def __init__(self) -> None:
        self._open = False
        self.stalls = 0

    def poll(self, run_dir: str, run: str, now: float, names: list[str] | None = None) -> dict | None:
        """The alert (a dict with nb watch's keys, then ``suspects``, ``since_s``,
        ``groups``), or None. ``names``: the folder's listing the caller made this poll
        (else it is listed here); the folder is read further only when it holds dumps.
        Never raises for a missing or unreadable folder."""
        try:
            if names is None:
                names = os.listdir(run_dir)
            newest = 0.0
            for name in names:
                if name.startswith(HANG_PREFIX) and name.endswith(".jsonl"):
                    try:
                        newest = max(newest, os.stat(os.path.join(run_dir, name)).st_mtime)
                    except FileNotFoundError:
                        continue
            if not newest:
                self._open = False
                return None
            report = hang_report(run_dir, now=now)
        except OSError:
            return None
        if not report["stalled"]:
            self._open = False
            return None
        if self._open:
            return None
        world = _world_size(run_dir)
        if not (world is not None and len(report["ranks"]) >= world) and now - newest < HANG_SETTLE_S:
            return None
        self._open = True
        self.stalls += 1
        suspects = report["suspects"]
        steps = [r["step"] for r in report["ranks"].values() if isinstance(r.get("step"), int)]
        head = f"hung since {report['since_s']:.0f} s"
        who = f"; suspects {_who(suspects)}" if suspects else ""
        return {
            "rule": "hang", "level": "error", "run": run,
            "rank": suspects[0] if len(suspects) == 1 else None, "host": None, "tag": None,
            "step": min(steps) if steps else None, "wall_time": now,
            "message": f"{head}{who}: {report['reason']} (nb hang {run})",
            "session": f"stall {self.stalls}", "suspects": suspects, "since_s": report["since_s"],
            "groups": report["groups"][:10],
        }


def hang_summary(run_dir: str, now: float | None = None) -> dict | None:
    """What ``nb show``, the report and the TUI say of a stall: None when the run's
    hang dumps say it is not stalled (or it has none), else ``{"since_wall",
    "since_s", "step", "suspects", "reason", "line"}``: ``line`` reads "hung since
    4m 12s at step 812; suspects rank 2" (``step``: the lowest step of the stalled
    ranks). Never raises."""
    try:
        with os.scandir(run_dir) as it:
            if not any(e.name.startswith(HANG_PREFIX) and e.name.endswith(".jsonl") for e in it):
                return None
        now = time.time() if now is None else now
        rep = hang_report(run_dir, now=now)
    except OSError:
        return None
    if not rep["stalled"]:
        return None
    steps = [r["step"] for r in rep["ranks"].values() if r.get("kind") == "stall" and isinstance(r.get("step"), int)]
    step = min(steps) if steps else None
    since_s = rep["since_s"] or 0.0
    suspects = rep["suspects"]
    line = (f"hung since {_duration(since_s)} at step {step if step is not None else '?'}"
            + (f"; suspects {_who(suspects)}" if suspects else "; no suspect") + " (nb hang)")
    return {"since_wall": now - since_s, "since_s": since_s, "step": step, "suspects": suspects,
            "reason": rep["reason"], "line": line}


def _duration(s: float) -> str:
    s = int(s)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s // 3600}h {s % 3600 // 60:02d}m"
