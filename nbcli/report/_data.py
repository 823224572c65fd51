"""The data of ``nb report``: what the page shows, read from runs and made small.

One concern: from :class:`nblog.RunReader` objects to one JSON-able dict (``build``).
Long series go through :mod:`nbcli.series` (min/max buckets); timers become a rank × step
grid with the stragglers of the ``nb timers`` rule; system metrics are grouped per
machine and per metric (one line per GPU); text and image thumbnails are bounded.
The HTML around it is :mod:`._html`'s.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from .. import series as S

if TYPE_CHECKING:
    from nblog import RunReader

MAX_BUCKETS = 2000  # per chart: buckets of the x axis (each series keeps mean/min/max)
HEAT_COLUMNS = 400  # step buckets of a timer heat map
MAX_TEXTS = 200  # text records per run (the latest)
MAX_TEXT_CHARS = 4000  # per text record
MAX_IMAGES = 24  # image thumbnails per run (the latest of each tag first)
IMAGES_PER_TAG = 4
THUMB_PX = 192  # the longer side of a thumbnail


def floats(a: np.ndarray | None, digits: int = 7) -> list | None:
    """A float array as a JSON list of values to ``digits`` significant digits (what a
    float32 holds; the file is half the size of full doubles), NaN (an empty bucket) as
    null."""
    if a is None:
        return None
    fmt = f"{{:.{digits}g}}".format
    return [None if v != v else float(fmt(v)) for v in np.asarray(a, np.float64).tolist()]


def positions(a: np.ndarray, steps: bool) -> list:
    """Bucket positions as a JSON list, exact: steps as integers, times as floats."""
    return np.asarray(a).astype(np.int64).tolist() if steps else np.asarray(a, np.float64).tolist()


def flatten(config: object, prefix: str = "") -> list[list]:
    """Nested config → ``[[dotted key, value], ...]`` in order; lists stay values (the
    config columns of ``nb report`` and of ``nb serve``'s runs table)."""
    if not isinstance(config, dict) or (prefix and not config):
        return [[prefix, config]]
    out = []
    for k, v in config.items():
        out += flatten(v, f"{prefix}.{k}" if prefix else str(k))
    return out


def run_info(reader: RunReader) -> dict:
    """Identity, status and last step (as ``nb ls`` says them: a failure on any rank
    makes it failed), failure (the ``failed: rank 3 (host7), ...`` line, or None), hang
    (the ``hung since ...; suspects rank 2`` line of a stall, or None),
    launcher, config (flattened) and sessions of one run (each last step as ``nb show``
    says it)."""
    from nblog.reader import hang_summary, run_row
    from nblog.reader.lowlevel import session_steps

    meta = reader.meta
    row = run_row(reader.dir)
    keys = ("session", "start", "host", "pid", "first_step", "last_step", "end", "end_reason", "world_size")
    sessions = [{k: s.get(k) for k in keys} for s in meta.get("sessions") or [] if isinstance(s, dict)]
    steps = session_steps(reader.dir, meta.get("sessions"))  # run.json's or rank 0's event log's, the higher
    for s in sessions:
        if s["session"] in steps:
            s["last_step"] = steps[s["session"]]
    return {
        "id": reader.id,
        "project": reader.project,
        "name": meta.get("name"),
        "status": row["status"],
        "last_step": row["last_step"],
        "failure": row["failure_line"],
        "hang": (hang_summary(reader.dir) or {}).get("line"),  # "hung since ... ; suspects rank 2" (nb hang)
        "world_size": meta.get("world_size"),
        "launcher": meta.get("launcher"),
        "job_id": meta.get("job_id"),
        "hosts": meta.get("hosts"),
        "created": meta.get("created"),
        "version": meta.get("nblog_version"),
        "config": flatten(reader.config),
        "sessions": sessions,
        "ranks": reader.ranks(),
    }


def _scalar_tags(reader: RunReader) -> list[str]:
    names: set[str] = set()
    for r in reader.ranks():
        names.update(reader.tags(r, "scalar"))
    return sorted(names)


def scalar_chart(tag: str, frames: Sequence[tuple[str, pl.DataFrame]], max_buckets: int = MAX_BUCKETS) -> dict:
    """One chart: each run's line (median across its ranks), band and non-finite points.

    Args:
        tag: the tag's name.
        frames: ``(run id, frame)`` pairs; each frame has columns rank, x (step), value.
        max_buckets: buckets of the shared x axis.
    """
    xs = np.concatenate([f["x"].to_numpy() for _id, f in frames]) if frames else np.zeros(0)
    grid = S.make_grid(xs, max_buckets)
    series = []
    for run_id, f in frames:
        b = S.band(S.buckets(f, grid), grid)
        bad, bad_total = S.nonfinite(f)
        series.append(
            {
                "run": run_id,
                "ranks": b.ranks,
                "line": floats(b.line),
                "lo": floats(b.lo),
                "hi": floats(b.hi),
                "outlier": b.outlier,
                "outlier_line": floats(b.outlier_line),
                "per_bucket": b.per_bucket,
                "points": len(f),
                "nonfinite": bad,
                "nonfinite_total": bad_total,
            }
        )
    return {"tag": tag, "bucketed": grid.bucketed, "x": positions(grid.x(), True), "series": series}


def scalar_charts(readers: Sequence, max_buckets: int = MAX_BUCKETS) -> list[dict]:
    """Every scalar tag of any run, in name order, one chart each (all ranks)."""
    tags = sorted({t for r in readers for t in _scalar_tags(r)})
    charts = []
    for tag in tags:
        frames = [(r.id, f) for r in readers if len(f := S.points(r, tag, rank=None))]
        charts.append(scalar_chart(tag, frames, max_buckets))
    return charts


def heat_map(tag: str, frame: pl.DataFrame, report: dict | None, columns: int = HEAT_COLUMNS) -> dict:
    """A timer as a rank × step grid of mean seconds (null: no occurrence there).

    Args:
        frame: columns rank, x (step), value (seconds).
        report: this timer's rows of ``nb timers``' report (:func:`nblog.reader.timer_report`):
            ``{"timer": its row of "timers", "ranks": its rows of "ranks", "rule":
            {"threshold", "floor_s", "warmup_steps"}}``.

    Returns:
        tag, x, bucketed, ranks, cells, lo, hi (the colour scale), and by the one
        straggler rule: stragglers (ranks), slowest_rank, slowest_s and median_s (lower
        medians per step, seconds), spread, rule (the rule's threshold, floor_s and
        warmup_steps; None without ``report``).
    """
    grid = S.make_grid(frame.filter(pl.col("value").is_finite())["x"].to_numpy(), columns)
    per = S.buckets(frame, grid)
    ranks = sorted(frame["rank"].unique().to_list())
    pos = {r: i for i, r in enumerate(ranks)}
    cells = np.full((len(ranks), grid.count), np.nan)
    if len(per):
        rows = np.array([pos[r] for r in per["rank"].to_list()], dtype=np.int64)
        cells[rows, per["bucket"].to_numpy()] = per["mean"].to_numpy()
    finite = cells[np.isfinite(cells)]
    out = {
        "tag": tag,
        "x": positions(grid.x(), True),
        "bucketed": grid.bucketed,
        "ranks": ranks,
        "cells": [floats(row) for row in cells],
        "lo": float(np.quantile(finite, 0.01)) if len(finite) else None,
        "hi": float(np.quantile(finite, 0.99)) if len(finite) else None,
        "stragglers": [],
        "slowest_rank": None,
        "slowest_s": None,
        "median_s": None,
        "spread": None,
        "rule": None,
    }
    if report:
        out["stragglers"] = [r["rank"] for r in report["ranks"] if r["straggler"]]
        for k in ("slowest_rank", "slowest_s", "median_s", "spread"):
            out[k] = report["timer"][k]
        out["rule"] = report.get("rule")
    return out


def timer_maps(reader: RunReader, columns: int = HEAT_COLUMNS) -> list[dict]:
    """Every timer of the run as a heat map, stragglers by ``nb timers``' rule (its
    defaults: :class:`nblog.reader.StragglerRule`)."""
    from nblog.reader import timer_report

    rep = timer_report(reader)
    maps = []
    for t in rep["timers"]:
        tag = t["tag"]
        frame = S.points(reader, tag, rank=None)
        if not len(frame):
            continue
        rows = {"timer": t, "ranks": [r for r in rep["ranks"] if r["tag"] == tag],
                "rule": {k: rep[k] for k in ("threshold", "floor_s", "warmup_steps")}}
        maps.append(heat_map(tag, frame, rows, columns))
    return maps


def _metric_group(tag: str) -> tuple[str, str]:
    """``system/gpu3/util_percent`` → ("gpu util_percent", "gpu3"); others → (tag, tag)."""
    parts = tag.split("/")
    if len(parts) == 3 and parts[0] == "system" and parts[1].startswith("gpu") and parts[1][3:].isdigit():
        return f"gpu {parts[2]}", parts[1]
    name = tag[len("system/"):] if tag.startswith("system/") else tag
    return name, name


def system_charts(reader: RunReader, max_buckets: int = MAX_BUCKETS) -> list[dict]:
    """Per machine: one chart per metric (x: unix seconds), one line per GPU for GPU
    metrics (the GPU grid), each line the bucket mean with its min/max band."""
    out = []
    for m in reader.machines():
        df = reader.system(m["hostname"])
        df = df.filter(pl.col("rank") == m["rank"]) if len(df) else df
        if not len(df):
            continue
        groups: dict[str, list[tuple[str, str]]] = {}
        for tag in sorted(df["tag"].unique().to_list()):
            g, label = _metric_group(tag)
            groups.setdefault(g, []).append((label, tag))
        charts = []
        for g, members in sorted(groups.items()):
            sub = df.filter(pl.col("tag").is_in([t for _l, t in members]))
            grid = S.make_grid(sub.filter(pl.col("value").is_finite())["wall_time"].to_numpy(), max_buckets, integer=False)
            series = []
            for label, tag in sorted(members, key=lambda m: (len(m[0]), m[0])):
                f = sub.filter(pl.col("tag") == tag).select(pl.lit(0, pl.Int32).alias("rank"),
                                                             pl.col("wall_time").alias("x"), "value")
                b = S.band(S.buckets(f, grid), grid)
                series.append({"label": label, "line": floats(b.line), "lo": floats(b.lo), "hi": floats(b.hi)})
            charts.append({"metric": g, "x": positions(grid.x(), False), "bucketed": grid.bucketed, "series": series})
        out.append({"hostname": m["hostname"], "rank": m["rank"],
                    "gpus": len(m.get("gpus") or []), "charts": charts})
    return out


def texts(reader: RunReader, limit: int = MAX_TEXTS) -> dict:
    """The latest ``limit`` text records of every rank (text cut at MAX_TEXT_CHARS)."""
    df = reader.text(all_ranks=True)
    total = len(df)
    rows = []
    for r in df.sort("step", "rank").tail(limit).iter_rows(named=True):
        t = r["text"] or ""
        rows.append({"step": r["step"], "rank": r["rank"], "tag": r["tag"],
                     "text": t if len(t) <= MAX_TEXT_CHARS else t[:MAX_TEXT_CHARS] + " …"})
    return {"rows": rows, "total": total}


def images(reader: RunReader, limit: int = MAX_IMAGES, per_tag: int = IMAGES_PER_TAG) -> dict:
    """Thumbnails (PNG, base64) of the latest images: up to ``per_tag`` of each tag and
    ``limit`` in all; an image that cannot be read is counted, not shown."""
    recs = reader.media(kind="image")
    total = len(recs)
    chosen = (recs.sort("step").group_by("tag", maintain_order=True).tail(per_tag)
              .sort("tag", "step").head(limit)) if total else recs
    rows, failed = [], 0
    for rec in chosen.iter_rows(named=True):
        try:
            img = reader.image(rec)
            img.thumbnail((THUMB_PX, THUMB_PX))
            if img.mode not in ("RGB", "RGBA", "L", "LA"):
                img = img.convert("RGBA")
            buf = io.BytesIO()
            img.save(buf, format="PNG", optimize=True)
        except Exception:  # noqa: BLE001 - a bad blob must not stop the report
            failed += 1
            continue
        rows.append({"tag": rec["tag"], "step": rec["step"], "caption": rec.get("caption"),
                     "width": rec.get("width"), "height": rec.get("height"),
                     "png": base64.b64encode(buf.getvalue()).decode("ascii")})
    return {"rows": rows, "total": total, "failed": failed}


def build(readers: Sequence, *, max_buckets: int = MAX_BUCKETS, scalars: bool = True) -> dict:
    """Everything the page shows for ``readers`` (one :class:`nblog.RunReader` each).

    Args:
        readers: the runs.
        max_buckets: buckets of a chart's x axis.
        scalars: make the scalar charts (``nb serve`` leaves them out: its page asks for
            each chart as it comes into view, from the points it keeps up to date).

    Returns a JSON-able dict: runs (info, timers, system, text, images per run, and
    damage: the damaged bytes of its event logs that the reads skipped,
    :meth:`nblog.RunReader.damage`) and charts (one per scalar tag, every run in it;
    ``[]`` without ``scalars``).
    """
    import time

    from nblog import __version__

    runs = []
    for r in readers:
        info = run_info(r)
        info["timers"] = timer_maps(r)
        info["system"] = system_charts(r, max_buckets)
        info["text"] = texts(r)
        info["images"] = images(r)
        runs.append(info)
    charts = scalar_charts(readers, max_buckets) if scalars else []
    for info, r in zip(runs, readers, strict=True):  # every read is done: what each skipped as damaged
        info["damage"] = r.damage()
    return {
        "generated": time.time(),
        "nb_version": __version__,
        "max_buckets": max_buckets,
        "runs": runs,
        "charts": charts,
    }


__all__ = ["build", "flatten", "heat_map", "images", "run_info", "scalar_chart", "scalar_charts", "system_charts",
           "texts", "timer_maps"]
