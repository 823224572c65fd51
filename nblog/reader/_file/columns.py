"""The scalars frame of :meth:`RunReader.scalars` built by Polars from the COLUMNS frames
as read, without numpy: what a first read in a fresh process waits for.

Every COLUMNS frame (``man nb-format``) already holds its records column by column.
Their bytes go to Polars as an Arrow IPC stream (:mod:`nblog.reader._file.ipc`), one record
batch a frame, beside a column holding each row's frame number; what is the same for
every row of a frame (the step and millisecond bases, the rank, the session, its start
and active-time offset, the hiding threshold, where its tag ids map to) is a small
per-frame table that Polars gathers from. The rows, their order and every value are
those of the numpy path of :meth:`RunReader._point_frame`, which serves what this one
does not: files of format 1 (POINTS frames), a session whose u32 milliseconds wrapped
(24.8 days), a big-endian machine.

Importing numpy (~60 ms) and ``numpy.ma`` (which Polars imports for numpy input) was
most of a first read of a million points; this path imports neither.

Where each column lies, its width and its base are the format's (``F.columns_layout``,
checked when the frame was read: ``_Columns.layout``); this module only maps each
column's ``struct`` code to its Arrow type.
"""

from __future__ import annotations

import io
import struct
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

import polars as pl

from ...format import _format as F
from .ipc import ipc_stream
from .logfile import _Columns
from .select import tag_set

if TYPE_CHECKING:
    from .._views.reader import RunReader

#: a column's struct code (``F.Column.code``) -> its Arrow type in the IPC stream
_ARROW_TYPE = {"H": "u16", "I": "u32", "q": "i64", "d": "f64"}
#: the per-frame table: column -> its Polars type. rstart/rlen: where the frame's file's
#: tag ids start in the table of tag names, and how many ids it defined; thr: the hiding
#: threshold of its session (null: none)
_INFO = {
    "step_base": pl.Int64, "ms_base": pl.Int64, "rank": pl.Int32, "session": pl.Int32, "wall0": pl.Float64,
    "offset": pl.Float64, "rstart": pl.Int64, "rlen": pl.Int64, "thr": pl.Int64,
}


def columns_frame(reader: RunReader, kind: int, tags: str | Iterable[str] | None, rank: int, all_ranks: bool,
                  include_hidden: bool, schema: dict) -> pl.DataFrame | None:
    """Points of ``kind`` as :meth:`RunReader._point_frame` gives them (columns and
    types of ``schema``, plus hidden with ``include_hidden``), or None where this path
    does not serve the files (then the numpy path does)."""
    if sys.byteorder != "little":
        return None
    wanted = tag_set(tags)
    ranks = reader.ranks() if all_ranks else [rank]
    reader._load(ranks)
    tag_names: list[str | None] = []  # per file, per tag id: its name when wanted, else None
    info: dict[str, list] = {k: [] for k in _INFO}
    runs: list[tuple[tuple[str, str, str], list[tuple[int, _Columns]]]] = []
    maybe_null = False  # whether some row may have no wanted tag (then rows are filtered)
    for r in ranks:
        files = reader._rank_files(r)
        thresholds = reader._thresholds(files)
        offsets = reader._offsets(files)
        for s, lf in files:
            chunks = lf._chunks
            if not chunks:
                continue
            if lf.ms_wrapped or not all(isinstance(c, _Columns) for c in chunks):
                return None
            names: list[str | None] = [None] * (max(lf.tags, default=-1) + 1)
            for tid, (k, name) in lf.tags.items():
                if k == kind and (wanted is None or name in wanted):
                    names[tid] = name
            if not any(n is not None for n in names):
                continue
            t = thresholds[s] if kind != F.KIND_SYSTEM else None
            wall0 = float(lf.header.get("wall_start") or 0.0)
            rstart = len(tag_names)
            tag_names += names
            for c in chunks:
                assert isinstance(c, _Columns)
                lay = c.layout
                if not lay.n:
                    continue
                for col, v in zip(_INFO, (lay.step.base, lay.ms.base, r, s, wall0, offsets[s], rstart, len(names), t),
                                  strict=True):
                    info[col].append(v)
                if lay.pattern:  # the ids are known here: 2 bytes a row where they fit
                    ids = struct.unpack_from(f"<{lay.pattern}{lay.tag.code}", c.payload, lay.tag.start)
                    maybe_null = maybe_null or any(i >= len(names) or names[i] is None for i in ids)
                    tag_t = "u16" if max(ids) < 1 << 16 else "u32"
                else:
                    maybe_null = True
                    tag_t = _ARROW_TYPE[lay.tag.code]
                key = (_ARROW_TYPE[lay.step.code], _ARROW_TYPE[lay.ms.code], tag_t)
                if not runs or runs[-1][0] != key:
                    runs.append((key, []))
                runs[-1][1].append((len(info["rank"]) - 1, c))
    if not runs:
        df = pl.DataFrame(schema=schema)
        return df.with_columns(pl.lit(False).alias("hidden")) if include_hidden else df
    frame_t = "u8" if len(info["rank"]) <= 1 << 8 else "u16" if len(info["rank"]) <= 1 << 16 else "u32"
    parts = [pl.read_ipc_stream(io.BytesIO(_run_stream(frame_t, key, frames))).lazy() for key, frames in runs]
    frame = pl.concat(parts, how="vertical_relaxed", rechunk=False) if len(parts) > 1 else parts[0]

    def per_frame(k: str) -> pl.Expr:
        """Each row's value of column ``k`` of the per-frame table: a constant where
        every frame has the same (one session: most of them), else gathered."""
        vals = info[k]
        if all(v == vals[0] for v in vals):
            return pl.lit(vals[0], dtype=_INFO[k])
        return pl.lit(pl.Series(k, vals, dtype=_INFO[k])).gather(pl.col("frame"))

    step = pl.col("step").cast(pl.Int64) + per_frame("step_base")
    tag_id = pl.col("tag").cast(pl.Int64)
    # null: an id this frame's file defined no wanted tag for (or none at all)
    tag = pl.lit(pl.Series("tag", tag_names, dtype=pl.String)).gather(
        pl.when(tag_id < per_frame("rlen")).then(tag_id + per_frame("rstart")))
    hiding = any(x is not None for x in info["thr"])
    hidden = (step >= per_frame("thr")).fill_null(False) if hiding else pl.lit(False)
    rows = frame.with_columns(step=step, tag=tag, hidden=hidden)
    if maybe_null or (hiding and not include_hidden):
        got = rows.collect()
        # rows left out only where there are any: a filter copies every column
        if got["tag"].null_count() or (hiding and not include_hidden and got["hidden"].any()):
            keep = pl.col("tag").is_not_null()
            got = got.filter(keep if include_hidden else keep & ~pl.col("hidden"))
        rows = got.lazy()
    # divided by a column, never by a constant: Polars multiplies by the reciprocal of a
    # constant divisor, which rounds otherwise than the division numpy (and the numpy
    # path) makes. The column is made from the data so that it stays one.
    thousand = (pl.col("frame") * 0 + 1000).cast(pl.Float64)
    seconds = (pl.col("ms").cast(pl.Int64) + per_frame("ms_base")).cast(pl.Float64) / thousand
    columns = [
        per_frame("rank").alias("rank"),
        per_frame("session").alias("session"),
        pl.col("step"),
        pl.col("tag"),
        pl.col("value"),
        (seconds + per_frame("wall0")).alias("wall_time"),
        (seconds + per_frame("offset")).alias("active_time"),
    ]
    if include_hidden:
        columns.append(pl.col("hidden"))  # of the rows (made from the steps as read, before their base was added)
    return rows.select(columns).collect()


def _run_stream(frame_t: str, key: tuple[str, str, str], frames: list[tuple[int, _Columns]]) -> bytes:
    """The IPC stream of consecutive COLUMNS frames of one shape: frame number (of type
    ``frame_t``), value, step, ms and tag columns, their bytes as the frames hold them
    (a tag pattern repeated, as u16 where ``key`` says so)."""
    step_t, ms_t, tag_t = key
    frame_code = {"u8": "<B", "u16": "<H", "u32": "<I"}[frame_t]
    batches: list[tuple[int, list[bytes | memoryview]]] = []
    for index, c in frames:
        lay = c.layout
        n, pattern, p = lay.n, lay.pattern, c.payload
        value, steps, ms, tag = (p[col.start : col.stop] for col in (lay.value, lay.step, lay.ms, lay.tag))
        if pattern:
            ids = tag.tobytes()
            if tag_t == "u16":
                ids = struct.pack(f"<{pattern}H", *struct.unpack(f"<{pattern}{lay.tag.code}", ids))
            size = len(ids) // pattern
            tids: bytes | memoryview = (ids * -(-n // pattern))[: size * n]
        else:
            tids = tag
        batches.append((n, [struct.pack(frame_code, index) * n, value, steps, ms, tids]))
    cols = [("frame", frame_t), ("value", "f64"), ("step", step_t), ("ms", ms_t), ("tag", tag_t)]
    return ipc_stream(cols, batches)
