"""``nb show RUN``: metadata, config, sessions, files, machines, tags, dropped points."""

from __future__ import annotations

import json
import os
import time

import typer

from nblog.reader.lowlevel import plural

from .._options import AllowDamaged, Json, Root, RunArg, Tags
from .._output import (
    Column,
    Output,
    Styled,
    cut_config,
    data,
    emit_json,
    fmt_bytes,
    fmt_config_value,
    fmt_duration,
    fmt_last_step,
    fmt_time,
    fmt_value,
    warn,
)
from .._output import info as note

_STATUS_STYLE = {"running": "green", "failed": "red bold", "preempted": "yellow", "stale": "yellow"}


def _nonfinite(bad: dict | None) -> str:
    if not bad:
        return "-"
    return f"{fmt_value(bad['value'])} at step {bad['step']} (rank {bad['rank']})"


def _last(tag: dict) -> Styled | str:
    if tag["kind"] == "text":
        text = tag.get("last_text") or ""
        return data(text if len(text) <= 60 else text[:57] + "...")
    if tag["kind"] == "media":
        return "-"
    return fmt_value(tag.get("last_value"))


def show(run: RunArg, tags: Tags = None, root: Root = None, as_json: Json = False,
         allow_damaged: AllowDamaged = False) -> None:
    """Show one run: metadata, what went wrong (the first failure with its traceback,
    sessions that ended without an END record, alerts), what code ran (provenance),
    config (and which keys a later session changed),
    sessions (with hidden points), the event log of each writing rank, machines, tags
    with their last value and first non-finite value, and dropped-point counters.
    --tag selects the tags listed (the other sections stay whole)."""
    from nblog.format import RUN_JSON
    from nblog.reader import RunReader, overview

    reader = RunReader(run, root)
    info = overview(reader, tags or None)
    if not reader.meta:
        warn(f"{os.path.join(reader.dir, RUN_JSON)} is missing or not a JSON object: the status is unknown")
    if as_json:
        emit_json(info)
        return
    out = Output()
    r, m = info["run"], info["meta"]
    job = m["job_id"]
    out.fields(
        [
            ("id", data(r["id"], "bold")),
            ("project", data(r["project"])),
            ("name", data(r["name"] if r["name"] is not None else "-")),
            ("status", data(r["status"], _STATUS_STYLE.get(r["status"], ""))),
            ("path", data(r["path"])),
            ("started", fmt_time(r["started"])),
            ("last write", fmt_time(r["last_write"])),
            ("duration", fmt_duration(r["duration_s"]) + " active"),
            ("last step", fmt_last_step(r["last_step"], r["last_step_updated"], r["status"] == "running",
                                        time.time())),
            ("world size", r["world_size"]),
            ("writing ranks", r["ranks"]),
            ("size", fmt_bytes(r["size_bytes"])),
            ("launcher", data(m["launcher"] or "-")),
            ("job id", data(f"{job} ({m['job_id_source']})" if job is not None else "-")),
            ("run id from", data(m["run_id_source"] or "-")),
            ("hosts", data(", ".join(str(h) for h in m["hosts"] or []) or "-")),
            ("versions", data(f"nblog {m['nblog_version'] or '?'}, format {m['format_version'] or '?'}")),
        ],
        title="Run",
    )
    _what_went_wrong(out, info)
    out.gap()
    changed = [s for s in info["sessions"] if s["config_changes"]]
    config, cut = cut_config(info["config"])  # a 100,000-character value is not printed whole
    out.block(json.dumps(config, indent=2, ensure_ascii=False, default=str),
              title="Config" + (f" (of session {info['sessions'][0]['session']})" if changed else ""))
    if cut:
        out.line(data(f"{plural(cut, 'long value')} cut above (all of it: nb show --json, config)", "yellow"))
    for s in changed:
        out.line(data(_config_note(s), "yellow"))
    for s in info["sessions"]:
        if s.get("config_unknown"):
            out.line(data(f"session {s['session']}: config unknown (rebuilt from its event log after "
                          "run.json could not be read)", "yellow"))
    out.gap()
    out.table(
        [Column("SESSION", True), Column("STARTED"), Column("ENDED"), Column("HOST"), Column("PID", True),
         Column("FIRST STEP", True), Column("LAST STEP", True), Column("HIDDEN", True)],
        (
            [s["session"], fmt_time(s["start"]),
             fmt_time(s["end"]) + (f" ({s['end_reason']})" if s.get("end_reason") else ""),
             data(s["host"] or "-"), s["pid"], s["first_step"], s["last_step"], s["hidden_points"]]
            for s in info["sessions"]
        ),
        title="Sessions (hidden: points of the session hidden by a later one, all ranks)",
    )
    out.gap()
    out.table(
        [Column("RANK", True), Column("SESSION", True), Column("FILE"), Column("SIZE", True),
         Column("POINTS", True), Column("HIDDEN", True), Column("FIRST STEP", True),
         Column("LAST STEP", True), Column("HOST"), Column("STATE")],
        (
            [f["rank"], f["session"], data(f["file"]), fmt_bytes(f["size_bytes"]), f["points"],
             f["hidden_points"], f["first_step"], f["last_step"], data(f["host"] or "-"), _state(f)]
            for f in info["files"]
        ),
        title="Event logs of the writing ranks",
    )
    if info["media"]:
        out.gap()
        out.table(
            [Column("RANK", True), Column("FILE"), Column("SIZE", True), Column("RECORDS", True),
             Column("MISSING", True)],
            (
                [p["rank"], data(p["file"]), fmt_bytes(p["size_bytes"]) if p["size_bytes"] is not None else "missing",
                 p["records"], data(str(p["missing"]), "red" if p["missing"] else "")]
                for p in info["media"]
            ),
            title="Media packs (missing: records whose bytes are past the end of the pack)",
        )
    out.gap()
    out.table(
        [Column("HOST"), Column("RANK", True), Column("CPUS", True), Column("MEMORY", True),
         Column("GPUS", True), Column("SYSTEM TAGS", True)],
        (
            [data(mc["hostname"]), mc["rank"], mc.get("cpu_count"),
             fmt_bytes(mc["memory_total_bytes"]) if isinstance(mc.get("memory_total_bytes"), int) else None,
             len(mc["gpus"]) if isinstance(mc.get("gpus"), list) else mc.get("gpu_count"),
             mc["system_tags"]]
            for mc in info["machines"]
        ),
        title="Machines (sampled by local rank 0)",
    )
    if tags and not info["tags"]:
        note(f"no tag of run {r['id']} matches --tag {' '.join(tags)}")
    out.gap()
    out.table(
        [Column("KIND"), Column("TAG"), Column("RANKS", True), Column("POINTS", True),
         Column("LAST STEP", True), Column("LAST VALUE", True), Column("FIRST NON-FINITE")],
        (
            [t["kind"], data(t["tag"], "bold"), t["ranks"], t["points"], t["last_step"], _last(t),
             data(_nonfinite(t.get("first_nonfinite")), "red" if t.get("first_nonfinite") else "")]
            for t in info["tags"]
        ),
        title="Tags (last value of the lowest rank logging the tag)",
    )
    out.gap()
    dropped = info["dropped"]
    out.fields(
        [(k, v) for k, v in dropped.items()] or [("dropped points", "none")],
        title="Dropped points (bad values, tags or steps, write errors)",
    )
    damaged = [d for f in info["files"] for d in f.get("damage") or ()]
    if damaged:  # each also reported on stderr as it was read (nbcli._damage)
        out.gap()
        out.table(
            [Column("RANK", True), Column("SESSION", True), Column("BYTES", True), Column("AT"),
             Column("HELD"), Column("POINTS LOST", True)],
            ([d["rank"], d["session"], d["bytes"], f"{d['start']}-{d['stop']}", d["frame"] or "unknown (frame header)",
              (d["points"] if d["points"] is not None else "unknown") if d["lost"] else "none (copy read)"]
             for d in damaged),
            title="Damaged bytes skipped",
        )
    p = info["problems"]

    if p["unknown_frames"]:
        warn(f"{plural(p['unknown_frames'], 'record')} of a newer format version {_was(p['unknown_frames'])} skipped")
    if p["media_missing"]:
        warn(f"{plural(p['media_missing'], 'media record')} {'points' if p['media_missing'] == 1 else 'point'} past the "
             "end of their pack (deleted or truncated)")
    if p["media_not_visible"]:
        note(f"{plural(p['media_not_visible'], 'media record')} of a session still writing "
             f"{'is' if p['media_not_visible'] == 1 else 'are'} not visible here yet")


_MAX_CHANGES = 8  # changed keys spelt out per session; the rest counted
_MAX_UNENDED = 10  # sessions without an END record spelt out; the rest counted
_MAX_ALERTS = 20  # the latest alerts listed; the rest counted


def _what_went_wrong(out: Output, info: dict) -> None:
    """The first failure (with the end of its traceback), sessions that ended without an
    END record, the latest alerts, and what code ran (provenance)."""
    from nblog.reader.lowlevel import TRACEBACK_LINES, provenance_lines

    hang = info.get("hang")
    if hang:
        out.gap()
        out.line(data(hang["line"], "red bold"))
        out.line(data(hang["reason"]))
    first = info.get("first_failure")
    unended = info.get("unended") or []
    died_first = bool(unended) and info.get("first_incident") == "unended"
    if died_first:  # a rank died first: the others' failures followed
        _unended(out, unended)
        unended = []
    if first:
        out.gap()
        out.line(data(("then " if died_first else "") + info["failure_line"], "red bold"))
        tb = (first.get("traceback") or "").rstrip("\n").splitlines()
        if len(tb) > TRACEBACK_LINES:
            tb = [f"... ({plural(len(tb) - TRACEBACK_LINES, 'line')} above: nb show --json, failures[].traceback)",
                  *tb[-TRACEBACK_LINES:]]
        if tb:
            out.block("\n".join(tb), title=f"Traceback of rank {first['rank']}")
        content = first.get("error_file_content")
        if isinstance(content, dict):
            msg = content.get("message")
            msg = msg.get("message") if isinstance(msg, dict) else msg
            ours = f"{first.get('type')}: {(first.get('message') or '').strip()}".splitlines()[0]
            if isinstance(msg, str) and msg.strip() and msg.strip().splitlines()[0] != ours:
                out.line(data(f"torchrun error file: {msg.strip().splitlines()[0]}"))
    if unended:
        _unended(out, unended)
    alerts = info.get("alerts") or []
    if alerts:
        out.gap()
        shown = alerts[-_MAX_ALERTS:]
        out.table(
            [Column("TIME"), Column("LEVEL"), Column("RANK", True), Column("STEP", True), Column("TITLE"),
             Column("TEXT")],
            (
                [fmt_time(a.get("wall")), data(str(a.get("level") or "?"), _LEVEL_STYLE.get(a.get("level"), "")),
                 a["rank"], a.get("step"), data(str(a.get("title") or ""), "bold"),
                 data(_short(str(a.get("text") or "")) + (f" (+{a['suppressed']} suppressed)" if a.get("suppressed") else ""))]
                for a in shown
            ),
            title=f"Alerts ({len(alerts)}" + (f", the last {len(shown)}" if len(shown) < len(alerts) else "") + ")",
        )
    lines = provenance_lines(info.get("provenance") or [])
    if lines:
        out.gap()
        out.fields([(k, data(v)) for k, v in lines], title="Provenance")


def _unended(out: Output, unended: list[dict]) -> None:
    out.gap()
    for u in unended[:_MAX_UNENDED]:
        out.line(data(u["line"], "red bold"))
    if len(unended) > _MAX_UNENDED:
        out.line(data(f"and {plural(len(unended) - _MAX_UNENDED, 'more session')} without an END record", "red"))


_LEVEL_STYLE = {"error": "red bold", "warn": "yellow", "info": ""}


def _short(text: str, width: int = 80) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 3] + "..."


def _config_note(session: dict) -> str:
    """One line: which keys of the config the session changed, before -> after."""
    changes = session["config_changes"]
    parts = []
    for c in changes[:_MAX_CHANGES]:
        before, after = fmt_config_value(c["before"]), fmt_config_value(c["after"])
        parts.append(f"{c['key']} " + (f"added: {after}" if c["change"] == "added" else
                                       f"removed (was {before})" if c["change"] == "removed" else
                                       f"{before} -> {after}"))
    if len(changes) > _MAX_CHANGES:
        parts.append(f"and {len(changes) - _MAX_CHANGES} more")
    return (f"session {session['session']} changed the config ({plural(len(changes), 'key')}): " + "; ".join(parts)
            + " (all of it: nb show --json, sessions[].config)")


def _was(count: int) -> str:
    return "was" if count == 1 else "were"


def _state(f: dict) -> str:
    if f["closed"]:
        state = f["end_status"] or "closed"
        if state == "running":  # ended by a signal or a preemption, to be resumed: not running now
            state = f"stopped ({f['end_reason']})" if f.get("end_reason") else "stopped"
    else:
        state = "open"
    if f["pending_bytes"]:
        state += f", {f['pending_bytes']} B torn/pending"
    if f["skipped_bytes"]:
        state += f", {f['skipped_bytes']} B damaged"
    return state


def register(app: typer.Typer) -> None:
    app.command("show")(show)
