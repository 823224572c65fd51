"""What ``nb show`` and ``nb timers`` report, computed from a :class:`RunReader`.

Everything here is a JSON-able dict or list (stable keys, ``None`` for missing, units
in key names), so the command line only formats it. Aggregation happens at read time,
never in the training loop. Imports numpy and polars (through the reader).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ...format import _format as F
from .._file.select import tag_matcher
from .._file.words import plural
from .._runfiles.failures import failure_line, unended_line, unended_sessions
from .._runfiles.hang import hang_summary
from .._runfiles.media import pack_check
from .._runfiles.progress import session_last_step
from .._runfiles.provenance import provenance
from .._runs.catalog import run_row
from .._views.reader import RunReader
from .._views.stragglers import MIN_STEPS, StragglerRule, timer_frames
from .._views.tail import json_number

if TYPE_CHECKING:
    import polars as pl


def _point_tags(reader: RunReader, rank: int, kind: int, match: Callable[[str], bool] | None = None) -> list[dict]:
    """Per tag of ``kind`` on ``rank`` for which ``match(tag)`` is true (every tag when
    ``match`` is None; visible points only): points, last_step,
    last_value (the last record at the largest step, in file order), bad (step, value)
    of the first non-finite value. Computed with numpy on the payload views, without
    building the rank's frame (an 80M-point run is summarised in seconds)."""
    files = reader._rank_files(rank)  # in session order
    thresholds = reader._thresholds(files)  # the hiding rule (man nb-format, HIDING RULE)
    out: dict[str, dict] = {}
    for s, lf in files:
        chunks = lf.point_chunks()
        local = [(tid, name) for tid, (k, name) in lf.tags.items() if k == kind and (match is None or match(name))]
        if not chunks or not local:
            continue
        remap = np.full(max(lf.tags) + 1, -1, np.int64)
        for i, (tid, _name) in enumerate(local):
            remap[tid] = i
        n_tags, t = len(local), thresholds[s]

        def visible(raw: np.ndarray, remap: np.ndarray = remap,
                    t: int | None = t) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            tid = raw["tag"]
            code = np.where(tid < len(remap), remap[np.minimum(tid, len(remap) - 1)], -1)
            keep = code >= 0
            if t is not None:
                keep &= raw["step"] < t
            return code[keep], raw["step"][keep], raw["value"][keep]

        count = np.zeros(n_tags, np.int64)
        top = np.full(n_tags, np.iinfo(np.int64).min, np.int64)
        bad: dict[int, tuple[int, float]] = {}
        for raw in chunks:
            code, step, value = visible(raw)
            count += np.bincount(code, minlength=n_tags)
            np.maximum.at(top, code, step)
            for i in np.flatnonzero(~np.isfinite(value)).tolist():
                c = int(code[i])
                if c not in bad or step[i] < bad[c][0]:
                    bad[c] = (int(step[i]), float(value[i]))
        last = np.full(n_tags, np.nan)
        for raw in chunks:  # the last record at each tag's largest step
            code, step, value = visible(raw)
            rev = np.flatnonzero(step == top[code])[::-1]
            if len(rev):
                idx = rev[np.unique(code[rev], return_index=True)[1]]  # each tag's last one
                last[code[idx]] = value[idx]
        for i, (_tid, name) in enumerate(local):
            if not count[i]:
                continue
            row = out.setdefault(name, {"tag": name, "points": 0, "last_step": None, "last_value": None})
            row["points"] += int(count[i])
            if row["last_step"] is None or top[i] >= row["last_step"]:
                row["last_step"], row["last_value"] = int(top[i]), float(last[i])
            if i in bad and ("bad" not in row or bad[i][0] < row["bad"][0]):
                row["bad"] = bad[i]
    return list(out.values())


def tag_table(
    reader: RunReader, ranks: Iterable[int] | None = None, tags: str | Iterable[str] | None = None
) -> list[dict]:
    """One dict per (kind, tag) over ``ranks`` (default: every rank with a file), for
    the tags matching one of the shell-style globs ``tags`` (None: every tag).

    Keys: kind, tag, ranks (how many ranks logged it), points (visible points, all
    ranks), last_step, last_value (of the lowest rank that logged the tag: rank 0 for
    scalars), last_rank, first_nonfinite (``{"step", "rank", "value"}`` of the earliest
    NaN or ±inf, lowest rank first at equal steps; None if every value is finite).
    Every entry has every key (None where it does not apply): ``last_text`` is the last
    text of a text tag, ``last_value`` None for text and media; media tags count records.
    Values that are not finite appear as the strings "nan", "inf", "-inf".
    """
    ranks = reader.ranks() if ranks is None else list(ranks)
    match = None if tags is None else tag_matcher(tags)
    out: dict[tuple[str, str], dict] = {}

    def entry(kind: str, tag: str) -> dict:
        return out.setdefault(
            (kind, tag),
            {"kind": kind, "tag": tag, "ranks": 0, "points": 0, "last_step": None, "last_value": None,
             "last_text": None, "last_rank": None, "first_nonfinite": None},
        )

    for r in ranks:
        for kind, code in (("scalar", F.KIND_SCALAR), ("timer", F.KIND_TIMER)):
            for row in _point_tags(reader, r, code, match):
                e = entry(kind, row["tag"])
                e["ranks"] += 1
                e["points"] += row["points"]
                if e["last_rank"] is None:
                    e["last_step"], e["last_value"], e["last_rank"] = row["last_step"], json_number(row["last_value"]), r
                bad = row.get("bad")
                if bad is not None:
                    cur = e["first_nonfinite"]
                    if cur is None or bad[0] < cur["step"]:
                        e["first_nonfinite"] = {"step": bad[0], "rank": r, "value": json_number(bad[1])}
        text = reader.text(rank=r)
        if match is not None and len(text):
            text = _only(text, match)
        if len(text):
            for tag, g in text.with_row_index("_i").sort("step", "_i").group_by("tag", maintain_order=True):
                e = entry("text", tag[0])
                e["ranks"] += 1
                e["points"] += len(g)
                if e["last_rank"] is None:
                    e["last_step"], e["last_rank"] = int(g["step"][-1]), r
                    e["last_text"] = g["text"][-1]
                e["last_value"] = None  # text has last_text instead
        media = reader.media(rank=r)  # visible records: a resume hides what it replaces
        if match is not None and len(media):
            media = _only(media, match)
        for (tag,), g in media.group_by("tag", maintain_order=True) if len(media) else ():
            e = entry("media", tag)
            e["ranks"] += 1
            e["points"] += len(g)
            if e["last_rank"] is None:
                e["last_step"], e["last_rank"] = int(cast(int, g["step"].max())), r
            e["last_value"] = None  # media records have no value
    order = {"scalar": 0, "timer": 1, "text": 2, "media": 3}
    return sorted(out.values(), key=lambda e: (order[e["kind"]], e["tag"]))


def config_changes(before: object, after: object) -> list[dict]:
    """How the config ``after`` differs from ``before`` (both JSON objects, nested dicts
    compared key by key): one ``{"key", "change", "before", "after"}`` per leaf that
    differs, ``change`` being "changed", "added" (``before`` None) or "removed"
    (``after`` None), keys dotted (``model.layers``), in key order. Empty when
    ``after`` is not a dict (the session kept the run's config)."""
    if not isinstance(after, dict):
        return []
    out: list[dict] = []

    def walk(a: dict, b: dict, prefix: str) -> None:
        for k in sorted(set(a) | set(b), key=str):
            x, y = a.get(k), b.get(k)
            if isinstance(x, dict) and isinstance(y, dict):
                walk(x, y, f"{prefix}{k}.")
            elif k not in a or k not in b or x != y or type(x) is not type(y):
                change = "added" if k not in a else "removed" if k not in b else "changed"
                out.append({"key": f"{prefix}{k}", "change": change, "before": x, "after": y})

    walk(before if isinstance(before, dict) else {}, after, "")
    return out


def _dict(v: object) -> dict:
    """``v`` if it is a dict, else an empty one (a record written by another version)."""
    return v if isinstance(v, dict) else {}


def _only(frame: pl.DataFrame, match: Callable[[str], bool]) -> pl.DataFrame:
    """The rows of the Polars frame ``frame`` whose ``tag`` ``match`` accepts."""
    keep = [t for t in frame["tag"].unique().to_list() if match(t)]
    return frame.filter(frame["tag"].is_in(keep))


def overview(reader: RunReader, tags: str | Iterable[str] | None = None) -> dict:
    """Everything ``nb show`` prints, as one JSON-able dict; ``tags`` (shell-style
    globs, None: all) selects the entries of ``tags``, nothing else.

    Keys: run (the ``nb ls`` row of :func:`nblog.reader._runs.catalog.run_row`, last step and
    status included: one definition, ``nblog.reader._runfiles.progress``), meta (the other
    ``run.json`` fields: launcher, job_id, job_id_source, run_id_source, hosts,
    nblog_version, format_version), config (the first session's), sessions (from
    ``run.json``, each with hidden_points: points hidden by later sessions, all ranks;
    last_step: the higher of run.json's and rank 0's event log's, as every view says it;
    config: the session's own config when it was started with another one, else None;
    config_unknown: True for a session rebuilt from its event log, whose config is lost;
    config_changes: :func:`config_changes` against the run's config), files (one per event
    log: rank, session, file, size_bytes, host, pid, wall_start, duration_s, first_step,
    last_step (the highest logged step it holds), points, hidden_points, closed, end_status,
    dropped, skipped_bytes, pending_bytes, unknown_frames, damage: :meth:`RunReader.damage`'s
    entries), media (:func:`media_pack` per rank that logged
    media), machines (:meth:`RunReader.machines` plus system_tags), tags
    (:func:`tag_table`), dropped (counter → points dropped, all ranks and sessions),
    problems (skipped_bytes, unknown_frames, pending_bytes, media_missing, media_not_visible:
    records of a session still writing whose bytes this machine does not see yet),
    and what went wrong and what ran (:func:`incidents`): failures, first_failure,
    failed_after, failure_line, unended, alerts, provenance.
    """
    meta = reader.meta
    files = []
    hidden_by_session: Counter[int] = Counter()
    dropped: Counter[str] = Counter()
    problems: Counter[str] = Counter()
    ranks = reader.ranks()
    for r in ranks:
        for s in reader.sessions(r):
            end = s["end"] or {}
            files.append(
                {
                    "rank": r,
                    "session": s["session"],
                    "file": os.path.basename(s["path"]),
                    "size_bytes": s["size_bytes"],
                    "host": s["host"],
                    "pid": s["pid"],
                    "wall_start": s["wall_start"],
                    "duration_s": s["duration_s"],
                    "first_step": s["first_step"],
                    "last_step": s["last_step"],
                    "points": s["points"],
                    "hidden_points": s["hidden_points"],
                    "closed": s["end"] is not None,
                    "end_status": end.get("status"),
                    "end_reason": end.get("reason") if isinstance(end.get("reason"), str) else None,
                    "dropped": dict(s["dropped"]),
                    "skipped_bytes": s["skipped_bytes"],
                    "pending_bytes": s["pending_bytes"],
                    "unknown_frames": s["unknown_frames"],
                    "damage": s["damage"],
                }
            )
            hidden_by_session[s["session"]] += s["hidden_points"]
            for k, v in (s["dropped"] or {}).items():
                if isinstance(v, int):
                    dropped[k] += v
            for k in ("skipped_bytes", "pending_bytes", "unknown_frames"):
                problems[k] += s[k] or 0
    sessions = []
    # rank 0's event logs know a session's steps past run.json's last progress update
    # (every few seconds: a kill -9 loses the last one)
    logged = {f["session"]: f["last_step"] for f in files if f["rank"] == 0 and f["last_step"] is not None}
    for s in meta.get("sessions") or []:
        if not isinstance(s, dict):
            continue
        n = s.get("session")
        sessions.append(
            {
                "session": n,
                "start": s.get("start"),
                "end": s.get("end"),
                "end_reason": s.get("end_reason"),
                "host": s.get("host"),
                "pid": s.get("pid"),
                "world_size": s.get("world_size"),
                "first_step": s.get("first_step"),
                "last_step": session_last_step(s.get("last_step") if s.get("last_step").__class__ is int else None,
                                               logged.get(n)),
                "hidden_points": hidden_by_session.get(n, 0) if n is not None else 0,
                "restart_counts": s.get("restart_counts") or {},
                # the run keeps its first config; a session started with another one has it here
                "config": s.get("config") if isinstance(s.get("config"), dict) else None,
                # rebuilt from an event log after run.json was lost: its config is not known
                "config_unknown": s.get("config_unknown") is True,
                "config_changes": config_changes(reader.config, s.get("config")),
            }
        )
    media = []
    for r in ranks:
        pack = media_pack(reader, r)
        if pack is not None:
            media.append(pack)
            problems["media_missing"] += pack["missing"]
            problems["media_not_visible"] += pack["not_visible"]
    machines = []
    for m in reader.machines():
        m = dict(m)
        m["system_tags"] = len(reader.tags(m["rank"], "system"))
        machines.append(m)
    keys = ("launcher", "job_id", "job_id_source", "run_id_source", "hosts", "nblog_version", "format_version")
    run = run_row(reader.dir)  # the nb ls row: its last step and status are every view's
    return {
        "run": run,
        "meta": {k: meta.get(k) for k in keys},
        "config": reader.config,
        "sessions": sessions,
        "files": files,
        "media": media,
        "machines": machines,
        "tags": tag_table(reader, ranks, tags),
        "dropped": dict(sorted(dropped.items())),
        "problems": {k: problems.get(k, 0) for k in ("skipped_bytes", "pending_bytes", "unknown_frames",
                                                     "media_missing", "media_not_visible")},
        **incidents(reader, files, run["status"]),
        "hang": hang_summary(reader.dir),  # the ranks' hang dumps (nblog.reader._runfiles.hang), None: no stall
    }


def media_pack(reader: RunReader, rank: int) -> dict | None:
    """The media packs of ``rank`` checked against their references without reading a
    blob; None when the rank logged no media. The one check is
    :func:`nblog.reader._runfiles.media.pack_check` (sizes from ``fstat`` of each open pack;
    ``missing`` for sessions that ended, ``not_visible`` for a session still writing).
    Blob checksums are verified when blobs are read (``nb media -o``,
    :meth:`RunReader.image`)."""
    return pack_check(reader, rank)


def timer_report(
    reader: RunReader,
    tags: str | Iterable[str] | None = None,
    *,
    last_steps: int | None = None,
    rule: StragglerRule | None = None,
) -> dict:
    """Timers across ranks, for ``nb timers --json``: :func:`timer_frames` as JSON-able dicts.

    Args:
        tags: shell-style globs selecting timers (None: all).
        last_steps: keep only each rank's last N steps.
        rule: the straggler rule's parameters (default ``StragglerRule()``: a rank
            whose lower median per step, warm-up left out, is at least 1.2 x the
            median of the ranks' and 5 ms above it).

    Returns:
        ``{"ranks": [...], "timers": [...], "cut": [...], "threshold", "floor_s",
        "warmup_steps", "min_steps", "world_size"}``. ``ranks`` has one row per
        (timer, rank): tag, rank, count, mean_s, p50_s, p95_s, max_s, total_s (every
        occurrence), steps, step_s (the rule's statistic: the lower median per step;
        None when not judged), straggler. ``timers`` has one row per timer: tag,
        ranks, judged, slowest_rank, slowest_s, median_s, fastest_rank, fastest_s,
        spread (slowest_s / median_s; None when the median is 0), stragglers,
        straggler. ``cut``: session, step, rank of each session whose points from
        ``step`` on were left out of the rule (``rank`` failed or died there).
    """
    rule = rule or StragglerRule()
    out: dict[str, Any] = {"ranks": [], "timers": [], "cut": [], "threshold": rule.threshold,
                           "floor_s": rule.floor_s, "warmup_steps": rule.warmup_steps, "min_steps": MIN_STEPS,
                           "world_size": reader.meta.get("world_size")}
    frames = timer_frames(reader, tags, last_steps=last_steps, rule=rule)
    if frames is not None:
        out.update(ranks=frames.ranks.to_dicts(), timers=frames.timers.to_dicts(), cut=frames.cut.to_dicts())
    return out


#: Text lines of a failure's traceback that ``nb show`` prints (``--json`` has it whole).
TRACEBACK_LINES = 40


def incidents(reader: RunReader, files: list[dict] | None = None, status: str | None = None) -> dict:
    """What went wrong and what ran, from every rank's event logs and provenance files.

    Keys: failures (every failure event, earliest first: rank, session, host, step,
    wall, type, module, message, traceback, error_file, error_file_content: torchrun's
    error file as read when the rank failed), first_failure (the earliest of the latest
    session, or None: a failure that a later session resumed from is only listed),
    failed_after (how many other ranks failed after it), failure_line
    (:func:`failure_line`), unended (sessions that ended without an END record: a
    ``kill -9``, an OOM kill, a lost node; rank, session, host, last_step, last_record:
    the wall time of its last record, line: :func:`unended_line`), first_incident
    ("unended" when a session of the latest session number stopped writing without an
    END record before the first failure's time, as when a killed rank makes the others
    fail; "failure"; None), alerts (``run.alert`` events, earliest first: rank, session, host,
    step, wall, level, title, text, suppressed), provenance (:func:`provenance`).

    A session without an END record counts as ended when the run is not running
    (finished, failed, stale), when its rank has a later session, or when another
    rank's same session has ended and its writer is not alive
    (:func:`nblog.reader._runfiles.progress.writer_alive`: on this machine its process; elsewhere,
    a record within the last minutes), as a rank still blocked in a collective after
    another one failed is.
    """
    if files is None:
        files = [{"rank": r, **s, "closed": s["end"] is not None} for r in reader.ranks() for s in reader.sessions(r)]
    events = reader.events()
    failures = [e for e in events if e.get("kind") == "failure"]
    alerts = [e for e in events if e.get("kind") == "alert"]
    # the current launch's: a failure that a later session resumed from is history
    current = max((f["session"] for f in files), default=None)
    now = [e for e in failures if e["session"] == current]
    first = now[0] if now else None
    after = len({e["rank"] for e in now[1:] if e["rank"] != first["rank"]}) if first else 0
    unended = []
    for f in unended_sessions(files, status):
        wall0, dur = f.get("wall_start"), f.get("duration_s")
        last = wall0 + dur if isinstance(wall0, (int, float)) and isinstance(dur, (int, float)) else None
        unended.append({"rank": f["rank"], "session": f["session"], "host": f.get("host"),
                        "last_step": f.get("last_step"), "last_record": last})
    for u in unended:
        u["line"] = unended_line(u)
    # which came first in the latest session: a rank that stopped writing without an END
    # record (it died after its last record) before the first exception, or the exception
    gone = [u for u in unended if u["session"] == current and u["last_record"] is not None]
    first_incident = None
    if first is not None:
        first_incident = "failure"
    if gone and (first is None or first.get("wall") is None
                 or min(u["last_record"] for u in gone) < first["wall"]):
        first_incident = "unended"
    return {
        "failures": failures,
        "first_failure": first,
        "failed_after": after,
        "failure_line": failure_line(first, after),
        "unended": unended,
        "first_incident": first_incident,
        "alerts": alerts,
        "provenance": provenance(reader.dir),
    }


def provenance_lines(records: list[dict]) -> list[tuple[str, str]]:
    """``nb show``'s summary of the latest provenance record of rank 0 (else of the
    lowest rank): (label, text) pairs for command, code (git commit, branch, dirty),
    python and torch versions."""
    if not records:
        return []
    low = min(r["rank"] for r in records)
    rec = max((r for r in records if r["rank"] == low), key=lambda r: r["session"])
    out: list[tuple[str, str]] = []
    argv = rec.get("orig_argv") or rec.get("argv")
    if isinstance(argv, list):
        out.append(("command", " ".join(str(a) for a in argv)))
    git = rec.get("git")
    if isinstance(git, dict):
        commit = str(git.get("commit") or "no commit")
        parts = [commit[:12]]
        if git.get("branch"):
            parts.append(f"on {git['branch']}")
        if git.get("dirty"):
            size = git.get("diff_bytes")
            parts.append(f"dirty ({size} B of diff in {git.get('diff_file')})" if git.get("diff_file") else "dirty")
        elif git.get("dirty") is False:
            parts.append("clean")
        if isinstance(git.get("untracked"), int) and git["untracked"]:
            parts.append(plural(git["untracked"], "untracked file"))
        if git.get("remote"):
            parts.append(f"from {git['remote']}")
        out.append(("code", ", ".join(parts)))
    else:
        out.append(("code", "not in a git repository"))
    py, libs = _dict(rec.get("python")), _dict(rec.get("libraries"))
    versions = [f"python {py.get('version', '?')}"]
    torch = libs.get("torch")
    if isinstance(torch, dict):
        t = f"torch {torch.get('version')}"
        if torch.get("cuda"):
            t += f" (CUDA {torch['cuda']}" + (f", NCCL {torch['nccl']})" if torch.get("nccl") else ")")
        versions.append(t)
    for name in ("numpy", "nblog"):
        if libs.get(name):
            versions.append(f"{name} {libs[name]}")
    out.append(("versions", ", ".join(versions)))
    out.append(("recorded", f"{rec['file']} (rank {rec['rank']}, session {rec['session']}; "
                            f"{plural(len(records), 'file')}; all of it: nb show --json)"))
    return out
