"""Reading media back: reference frames, verified blobs, images, histograms.

The event logs hold references (step, tag, offset, length, metadata); the bytes stay
in ``media.r<rank>.pack`` until asked for, and each blob read is checked against its
reference and both checksums (``_pack.read_blob``). The hiding rule (``man nb-format``, HIDING RULE) applies
to media as to scalars: per rank, a record of session *s* at a step ≥ the first step
of a later session of that rank is hidden unless ``include_hidden=True``.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np
import polars as pl

from ... import _log as log
from ...format import _format as F
from ...format import _pack as P
from ...format._filenames import pack_file_name, parse_pack_file_name, session_pack_file_name
from ...format._runfile import open_regular
from ...media._media_encode import decode_histogram
from .._file.select import tag_set as _as_tags

if TYPE_CHECKING:
    from PIL import Image

    from .._views.reader import RunReader

Tags = str | Iterable[str] | None
Record = Mapping[str, Any] | pl.DataFrame  # a row dict of a media frame, or a one-row frame

#: Columns of :meth:`RunReader.media` frames (``hidden`` added with include_hidden).
MEDIA_SCHEMA = {
    "rank": pl.Int32,
    "session": pl.Int32,
    "step": pl.Int64,
    "tag": pl.String,
    "kind": pl.String,  # "image", "histogram" or "audio"
    "format": pl.String,  # "png", "jpeg", "wav" or "histogram" (the blob's encoding)
    "wall_time": pl.Float64,  # unix seconds
    "offset": pl.Int64,  # of the blob's payload in media.r<rank>.pack
    "length": pl.Int64,  # bytes
    "width": pl.Int32,  # images: pixels (null for other kinds)
    "height": pl.Int32,
    "channels": pl.Int32,  # images and audio
    "sample_rate": pl.Int32,  # audio: Hz
    "bins": pl.Int32,  # histograms
    "caption": pl.String,
    "meta": pl.String,  # the whole metadata object as JSON
}
#: Columns of :meth:`RunReader.histograms` frames: one row per (record, bin).
HISTOGRAM_SCHEMA = {
    "rank": pl.Int32,
    "session": pl.Int32,
    "step": pl.Int64,
    "tag": pl.String,
    "wall_time": pl.Float64,
    "bin": pl.Int32,  # 0 .. bins-1
    "bin_left": pl.Float64,
    "bin_right": pl.Float64,  # the last bin includes its right edge (numpy.histogram)
    "count": pl.Int64,
    "num": pl.Int64,  # finite values (with explicit edges, some may be in no bin)
    "min": pl.Float64,  # of the finite values (null when none)
    "max": pl.Float64,
    "sum": pl.Float64,
    "sum_squares": pl.Float64,
    "nan": pl.Int64,  # values counted apart, never binned
    "pos_inf": pl.Int64,
    "neg_inf": pl.Int64,
}
_META_COLUMNS = ("width", "height", "channels", "sample_rate", "bins", "caption")
_STAT_COLUMNS = ("num", "min", "max", "sum", "sum_squares", "nan", "pos_inf", "neg_inf")


def records(reader: RunReader, tags: Tags, rank: int, kind: str | None,
            include_hidden: bool) -> Iterator[tuple[int, int, str | None, float, int, int, dict, bool]]:
    """Yield ``(session, step, name, wall_time, offset, length, meta, hidden)``."""
    wanted = _as_tags(tags)
    files = reader._rank_files(rank)
    thresholds = reader._thresholds(files)
    for s, lf in files:
        t = thresholds[s]
        wall0 = float(lf.header.get("wall_start") or 0.0)
        for step, tid, ms, offset, length, meta in lf.media:
            tkind, name = lf.tags.get(tid, (None, None))
            if tkind != F.KIND_MEDIA or (wanted is not None and name not in wanted):
                continue
            if kind is not None and meta.get("kind") != kind:
                continue
            hidden = t is not None and step >= t
            if hidden and not include_hidden:
                continue
            yield s, step, name, wall0 + ms / 1000.0, offset, length, meta, hidden


def media_frame(reader: RunReader, tags: Tags, rank: int, kind: str | None, include_hidden: bool) -> pl.DataFrame:
    """The frame of :meth:`RunReader.media`."""
    rows: dict[str, list] = {k: [] for k in (*MEDIA_SCHEMA, "hidden")}
    for s, step, name, wall, offset, length, meta, hidden in records(reader, tags, rank, kind, include_hidden):
        rows["rank"].append(rank)
        rows["session"].append(s)
        rows["step"].append(step)
        rows["tag"].append(name)
        rows["kind"].append(_str(meta.get("kind")))
        rows["format"].append(_str(meta.get("format")))
        rows["wall_time"].append(wall)
        rows["offset"].append(offset)
        rows["length"].append(length)
        for col in _META_COLUMNS:
            v = meta.get(col)
            rows[col].append(_str(v) if col == "caption" else _int(v))
        rows["meta"].append(json.dumps(meta, separators=(",", ":")))
        rows["hidden"].append(hidden)
    schema = dict(MEDIA_SCHEMA)
    if include_hidden:
        schema["hidden"] = pl.Boolean
    else:
        rows.pop("hidden")
    return pl.DataFrame(rows, schema=schema)


def _int(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and -(1 << 31) <= v < (1 << 31) else None


def _str(v: object) -> str | None:
    return v if isinstance(v, str) else None


def _field(record: Record, name: str) -> Any:
    if isinstance(record, pl.DataFrame):
        if len(record) != 1:
            raise ValueError(f"a media record is one row; this frame has {len(record)}")
        return record[name][0]
    if isinstance(record, Mapping):
        return record[name]
    raise TypeError(f"a media record is a row dict or a one-row frame, got {type(record).__name__}")


def pack_path(reader: RunReader, rank: int, session: int | None = None) -> str:
    """The pack holding the blobs of ``session`` of ``rank`` (``_pack``):
    ``media.r<rank>.s<session>.pack`` when that file exists, else ``media.r<rank>.pack``
    (also for ``session`` None)."""
    if session is not None:
        path = os.path.join(reader.dir, session_pack_file_name(rank, session))
        if os.path.lexists(path):
            return path
    return os.path.join(reader.dir, pack_file_name(rank))


def pack_paths(reader: RunReader, rank: int) -> list[str]:
    """Every pack of ``rank`` there is: ``media.r<rank>.pack`` first, then the
    sessions' own packs in session order."""
    try:
        names = os.listdir(reader.dir)
    except OSError:
        names = []
    own = []
    for name in names:
        rs = parse_pack_file_name(name)
        if rs is not None and rs[0] == rank and rs[1] is not None:
            own.append((rs[1], name))
    legacy = os.path.join(reader.dir, pack_file_name(rank))
    return [legacy] + [os.path.join(reader.dir, n) for _s, n in sorted(own)]


def _optional(record: Record, name: str) -> int | None:
    if isinstance(record, pl.DataFrame) and name not in record.columns:
        return None
    if isinstance(record, Mapping) and name not in record:
        return None
    v = _field(record, name)
    return None if v is None else int(v)


def _open_size(path: str) -> int | None:
    """The size of ``path`` from ``fstat`` of the opened file (None: missing or not a
    regular file). On a network file system a new open gets the size from the server,
    where ``stat`` of the path may answer from a cache that predates the last append."""
    try:
        with open_regular(path) as f:
            return os.fstat(f.fileno()).st_size
    except OSError:
        return None


def pack_check(reader: RunReader, rank: int) -> dict | None:
    """The media packs of ``rank`` checked against their references without reading a
    blob (for ``nb show``); None when the rank logged no media.

    Returns a dict: rank, file (``media.r<rank>.pack``), files (every pack holding
    records, with ``size_bytes`` each: None when missing), size_bytes (their total;
    None when none exists), records (every reference, hidden ones too), missing
    (references to bytes past the end of a pack whose session has ended: deleted or
    truncated) and not_visible (the same for a session still writing, whose last
    appends this machine may not see yet: not a problem). Sizes come from ``fstat`` of
    each pack opened, never from a cached ``stat``.
    """
    recs = reader.media(rank=rank, include_hidden=True)
    if not len(recs):
        return None
    live = {s for s, lf in reader._rank_files(rank) if lf.end is None}
    sizes: dict[str, int | None] = {}
    missing = not_visible = 0
    ends = (recs["offset"] + recs["length"]).to_list()
    for s, end in zip(recs["session"].to_list(), ends, strict=True):
        path = pack_path(reader, rank, s)
        if path not in sizes:
            sizes[path] = _open_size(path)
        size = sizes[path]
        if size is None or end > size:
            if s in live:
                not_visible += 1
            else:
                missing += 1
    known = [v for v in sizes.values() if v is not None]
    return {
        "rank": rank,
        "file": pack_file_name(rank),
        "files": [{"file": os.path.basename(p), "size_bytes": v} for p, v in sizes.items()],
        "size_bytes": sum(known) if known else None,
        "records": len(recs),
        "missing": missing,
        "not_visible": not_visible,
    }


def media_bytes(reader: RunReader, record: Record) -> bytes:
    """The verified blob of one record (a row of :meth:`RunReader.media`). A record
    without its ``session`` (older callers) gets the session of the one reference of
    its rank with that offset and length, when the rank has packs of several sessions.

    Raises:
        BlobError: the pack holds no blob that matches the reference.
        ValueError: the record has no session and several sessions' packs hold a
            reference with its offset and length (which one is meant is unknown).
        OSError: the pack cannot be opened.
    """
    rank = int(_field(record, "rank"))
    offset, length = int(_field(record, "offset")), int(_field(record, "length"))
    session = _optional(record, "session")
    if session is None and len(pack_paths(reader, rank)) > 1:
        found = {r[0] for r in records(reader, None, rank, None, True) if r[4] == offset and r[5] == length}
        if len(found) > 1:
            raise ValueError(f"media record of rank {rank} at offset {offset} is in several "
                             "sessions' packs: pass its session")
        session = found.pop() if found else None
    path = pack_path(reader, rank, session)
    with open_regular(path) as f:
        return P.read_blob(f, offset, length, path)[1]


def iter_bytes(reader: RunReader, frame: pl.DataFrame) -> Iterator[tuple[dict[str, Any], bytes]]:
    """Yield ``(row dict, verified bytes)`` for each row of a media frame, opening
    each pack once."""
    handles: dict[str, BinaryIO] = {}
    try:
        for row in frame.iter_rows(named=True):
            rank = int(row["rank"])
            if row.get("session") is None:
                yield row, media_bytes(reader, row)
                continue
            path = pack_path(reader, rank, int(row["session"]))
            if path not in handles:
                handles[path] = open_regular(path)
            yield row, P.read_blob(handles[path], int(row["offset"]), int(row["length"]), path)[1]
    finally:
        for f in handles.values():
            f.close()


def image(reader: RunReader, record: Record) -> Image.Image:
    """The image of one record as a loaded ``PIL.Image.Image``."""
    from PIL import Image

    kind = _field(record, "kind")
    if kind != "image":
        raise ValueError(f"record is {kind!r} media, not an image")
    img = Image.open(io.BytesIO(media_bytes(reader, record)))
    img.load()
    return img


def histograms(reader: RunReader, tags: Tags, rank: int, include_hidden: bool) -> pl.DataFrame:
    """The frame of :meth:`RunReader.histograms`."""
    schema = dict(HISTOGRAM_SCHEMA)
    if include_hidden:
        schema["hidden"] = pl.Boolean
    found = list(records(reader, tags, rank, "histogram", include_hidden))
    if not found:
        return pl.DataFrame(schema=schema)
    record: list[np.ndarray] = []
    edges_l: list[np.ndarray] = []
    edges_r: list[np.ndarray] = []
    counts: list[np.ndarray] = []
    good: list[tuple] = []
    handles: dict[str, BinaryIO] = {}
    try:
        for item in found:
            s, _step, _name, _wall, offset, length, _meta, _hidden = item
            path = pack_path(reader, rank, s)
            try:
                if path not in handles:
                    handles[path] = open_regular(path)
                edges, c = decode_histogram(P.read_blob(handles[path], offset, length, path)[1])
            except (ValueError, OSError):  # the pack missing, or BlobError (missing, torn, corrupt), or a bad payload
                continue
            record.append(np.full(len(c), len(good), np.int64))
            good.append(item)
            edges_l.append(edges[:-1])
            edges_r.append(edges[1:])
            counts.append(c)
    finally:
        for f in handles.values():
            f.close()
    if len(good) < len(found):
        log.warning(
            "nblog: %d of %d histograms of rank %d could not be read from %s (missing, torn or "
            "corrupt blobs); they are left out",
            len(found) - len(good), len(found), rank, path,
        )
    found = good
    if not found:
        return pl.DataFrame(schema=schema)
    rec = np.concatenate(record)
    starts = np.concatenate([[0], np.cumsum([len(c) for c in counts])[:-1]])
    per_record = pl.DataFrame(
        {
            "rank": [rank] * len(found),
            "session": [x[0] for x in found],
            "step": [x[1] for x in found],
            "tag": [x[2] for x in found],
            "wall_time": [x[3] for x in found],
            **{k: [x[6].get(k) for x in found] for k in _STAT_COLUMNS},
            "hidden": [x[7] for x in found],
        },
        schema={**{k: schema[k] for k in HISTOGRAM_SCHEMA if k not in ("bin", "bin_left", "bin_right", "count")},
                "hidden": pl.Boolean},
        strict=False,
    )
    bins = pl.DataFrame(
        {
            "bin": (np.arange(len(rec)) - starts[rec]).astype(np.int32),
            "bin_left": np.concatenate(edges_l),
            "bin_right": np.concatenate(edges_r),
            "count": np.concatenate(counts),
        }
    )
    out = pl.concat([per_record.select(pl.all().gather(pl.Series(rec))), bins], how="horizontal")
    return out.select(list(schema))
