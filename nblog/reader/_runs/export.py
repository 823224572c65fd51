"""Merging a run's rank logs into one Polars frame and writing it: ``nb export``.

:func:`read_frame` picks the kind, ranks and tags (shell-style globs) and returns the
reader's frame; :func:`write_frame` writes Parquet, CSV or NDJSON; :func:`export_root`
writes every run under a root as a hive-partitioned Parquet dataset
(``project=…/run=…/rank=…/part-0.parquet``) that Polars, DuckDB or Spark scan lazily.
Imports polars.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from typing import IO
from urllib.parse import quote

import polars as pl

from ...format import _format as F
from ...format._filesafety import write_atomic
from ...format._format import json_number
from .._file.select import tag_matcher
from .._views.reader import RunReader
from .catalog import list_runs

#: Kinds of frames ``nb export`` writes → the reader's tag kind.
EXPORT_KINDS = {"scalars": "scalar", "timers": "timer", "system": "system", "text": "text"}
FORMATS = ("parquet", "csv", "ndjson")
_SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".ndjson": "ndjson", ".jsonl": "ndjson", ".json": "ndjson"}
#: Columns that the hive layout carries in folder names, not in the files.
HIVE_COLUMNS = ("project", "run", "rank")


def format_for(path: str | os.PathLike) -> str | None:
    """The format a file name's suffix implies (``.parquet``/``.pq``, ``.csv``,
    ``.ndjson``/``.jsonl``/``.json``), or None."""
    return _SUFFIXES.get(os.path.splitext(os.fspath(path))[1].lower())


def match_tags(reader: RunReader, kind: str, patterns: str | Iterable[str] | None, ranks: Iterable[int]) -> list[str] | None:
    """Tag names of ``kind`` (a reader kind: "scalar", "timer", ...) on ``ranks`` that
    match a glob of ``patterns``; None when ``patterns`` is None (every tag)."""
    if patterns is None:
        return None
    match = tag_matcher(patterns)
    return sorted({t for r in ranks for t in reader.tags(r, kind) if match(t)})


def read_frame(
    reader: RunReader,
    kind: str = "scalars",
    *,
    tags: str | Iterable[str] | None = None,
    rank: int = 0,
    all_ranks: bool = False,
    include_hidden: bool = False,
) -> pl.DataFrame:
    """One frame of ``kind`` ("scalars", "timers", "system", "text") for rank ``rank`` or
    every rank merged, with ``rank`` and ``session`` columns.

    ``tags`` are shell-style globs. System metrics are never hidden; their frame
    (one machine per sampling rank) has a ``hostname`` column.

    Raises:
        ValueError: an unknown kind.
    """
    if kind not in EXPORT_KINDS:
        raise ValueError(f"unknown kind {kind!r}; choose one of {', '.join(EXPORT_KINDS)}")
    ranks = reader.ranks() if all_ranks else [rank]
    names = match_tags(reader, EXPORT_KINDS[kind], tags, ranks)  # None: every tag
    if kind == "system":
        df = reader.system(tags=names)
        return df if all_ranks else df.filter(pl.col("rank") == rank)
    if kind == "text":
        df = reader.text(names, rank=rank, all_ranks=all_ranks, include_hidden=include_hidden)
    elif kind == "timers":
        df = reader.timers(names, rank=rank, all_ranks=all_ranks, include_hidden=include_hidden)
    else:
        df = reader.scalars(names, rank=rank, all_ranks=all_ranks, include_hidden=include_hidden)
    return df


#: Rows of each piece of a streamed frame (:func:`read_frames`): ~48 MiB of scalars.
STREAM_ROWS = 1 << 20
_POINT_KINDS = {"scalars": F.KIND_SCALAR, "timers": F.KIND_TIMER}


def read_frames(
    reader: RunReader,
    kind: str = "scalars",
    *,
    tags: str | Iterable[str] | None = None,
    rank: int = 0,
    all_ranks: bool = False,
    include_hidden: bool = False,
    rows: int | None = None,
) -> Iterator[pl.DataFrame]:
    """The frame of :func:`read_frame` as consecutive pieces of about ``rows`` rows, in
    its row order (``rows``: :data:`STREAM_ROWS` by default), for :func:`write_frames`. Scalars and timers are decoded piece by
    piece as the pieces are asked for, so the whole frame is never held (the rank logs'
    bytes are); system metrics and text come as one piece. There is always at least one
    piece: a selection without rows gives one empty frame with the columns.

    Raises:
        ValueError: an unknown kind (at the call, before any piece).
    """
    if kind not in _POINT_KINDS:
        return iter([read_frame(reader, kind, tags=tags, rank=rank, all_ranks=all_ranks,
                                include_hidden=include_hidden)])
    ranks = reader.ranks() if all_ranks else [rank]
    names = match_tags(reader, EXPORT_KINDS[kind], tags, ranks)  # None: every tag
    return reader._point_frames(_POINT_KINDS[kind], names, rank, all_ranks, include_hidden, rows or STREAM_ROWS)


def write_frames(
    frames: Iterable[pl.DataFrame], dest: str | os.PathLike | IO[bytes], fmt: str,
    metadata: dict[str, str] | None = None, *, follow_links: bool = True,
) -> tuple[int, int]:
    """Write the pieces of one frame (:func:`read_frames`; every piece with the same
    columns) as one file, one piece in memory at a time: the same file as
    :func:`write_frame` of their concatenation (for Parquet, the same rows; its row
    groups may differ). ``dest``, ``metadata`` and ``follow_links`` as there.

    Returns:
        ``(rows, ranks)``: rows written, distinct values of the ``rank`` column.

    Raises:
        ValueError: an unknown format, or no piece at all.
        OSError: the file cannot be written, see :func:`write_output`.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    pieces = iter(frames)
    first = next(pieces, None)
    if first is None:
        raise ValueError("no frame to write")
    count = {"rows": 0}
    ranks: set[int] = set()

    def counted() -> Iterator[pl.DataFrame]:
        for df in _chain(first, pieces):
            count["rows"] += len(df)
            if "rank" in df.columns and len(df):
                ranks.update(df["rank"].unique().to_list())
            yield df

    if isinstance(dest, (str, os.PathLike)):
        write_output(dest, lambda f: _write_pieces(counted(), first.schema, f, fmt, metadata),
                     follow_links=follow_links)
    else:
        _write_pieces(counted(), first.schema, dest, fmt, metadata)
    return count["rows"], len(ranks)


def _chain(first: pl.DataFrame, rest: Iterator[pl.DataFrame]) -> Iterator[pl.DataFrame]:
    yield first
    yield from rest


def _write_pieces(pieces: Iterator[pl.DataFrame], schema: pl.Schema, f: IO[bytes], fmt: str,
                  metadata: dict[str, str] | None) -> None:
    """Stream ``pieces`` into ``f``: Parquet through a Polars sink fed by them (an IO
    source plugin), CSV and NDJSON piece after piece."""
    if fmt == "parquet":
        from polars.io.plugins import register_io_source

        def source(with_columns: list[str] | None, predicate: pl.Expr | None, n_rows: int | None,
                   _batch_size: int | None) -> Iterator[pl.DataFrame]:
            for df in pieces:  # a plain sink asks for everything; honour a narrower ask anyway
                if with_columns is not None:
                    df = df.select(with_columns)
                if predicate is not None:
                    df = df.filter(predicate)
                if n_rows is not None:
                    df = df.head(n_rows)
                    n_rows -= len(df)
                yield df
                if n_rows is not None and n_rows <= 0:
                    return

        lazy = register_io_source(source, schema=schema)
        lazy.sink_parquet(f, compression="zstd", compression_level=1, statistics=True, metadata=metadata)
        return
    for i, df in enumerate(pieces):
        if fmt == "csv":
            df.write_csv(f, include_header=i == 0)
        else:
            f.write(_ndjson(df))


def write_frame(
    df: pl.DataFrame, dest: str | os.PathLike | IO[bytes], fmt: str, metadata: dict[str, str] | None = None,
    *, follow_links: bool = True,
) -> None:
    """Write ``df`` to a path or a binary stream; ``metadata``: key-value pairs stored in
    a Parquet file's footer. A path is written as :func:`write_output` says (atomically
    for a regular file; in place for a device, FIFO or ``/dev/fd/N``).

    NDJSON keeps NaN and ±inf as the strings "nan", "inf" and "-inf" (JSON has no such
    numbers; Polars alone would write null). CSV writes ``NaN``/``inf``; Parquet is exact.

    Raises:
        ValueError: an unknown format.
        OSError: the file cannot be written, see :func:`write_output`.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if isinstance(dest, (str, os.PathLike)):
        write_output(dest, lambda f: _write(df, f, fmt, metadata), follow_links=follow_links)
    else:
        _write(df, dest, fmt, metadata)


#: Paths that name an open file descriptor (``>(cmd)``, ``/dev/stdout``): written in place.
_FD_PATH = re.compile(r"/(?:dev/(?:fd/\d+|stdin|stdout|stderr)|proc/(?:self|thread-self|\d+)/fd/\d+)")


def write_output(path: str | os.PathLike, write: Callable[[IO[bytes]], None], *, follow_links: bool = True) -> None:
    """Write a file at ``path`` by calling ``write`` with a binary file object, the way
    ``cp`` treats its target.

    - Nothing there, or a regular file: a temp file beside it, then a rename, so a reader
      never sees half of it; a replaced file keeps its permission bits (and its owner
      and group where we may set them). A hard link to the old file keeps the old text.
    - With ``follow_links`` (the user's own ``-o PATH``), a symlink is followed: the file
      it points to is replaced, in its own folder, and the link stays.
      Without (files nb makes inside an output folder), a symlink or any other
      non-folder there is replaced by a regular file and never written through.
    - With ``follow_links``, something that exists and is neither a regular file nor a
      folder (a character or block device, a FIFO, ``/dev/fd/N``, ``/dev/stdout``) is
      opened and written in place, streamed; a FIFO waits for its reader.

    Raises:
        OSError: the file cannot be written (``IsADirectoryError``: ``path`` is a folder;
            ``FileNotFoundError``: its folder does not exist; a failure while writing,
            such as a full disk, also from Polars); the message names ``path``, never
            the temp file, which is removed.
    """
    path = os.fspath(path)
    if follow_links and _FD_PATH.fullmatch(os.path.abspath(path)):
        return _write_in_place(path, write)
    try:
        st = os.stat(path) if follow_links else os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as err:
        raise _write_error(path, err) from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(f"{path} is a folder; name a file to write")
    if st is not None and follow_links and not stat.S_ISREG(st.st_mode):
        return _write_in_place(path, write)
    target = os.path.realpath(path) if follow_links else path  # a dangling link: the file it names
    folder = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(folder):  # name the user's path, not our temp file
        raise FileNotFoundError(f"the folder {folder} does not exist")
    keep = st if st is not None and stat.S_ISREG(st.st_mode) else None

    def put(f: IO[bytes]) -> None:
        write(f)
        if keep is not None:
            if (keep.st_uid, keep.st_gid) != (os.geteuid(), os.getegid()):
                try:
                    os.fchown(f.fileno(), keep.st_uid, keep.st_gid)
                except OSError:  # not root: the new file is ours, as with cp
                    pass
            os.fchmod(f.fileno(), stat.S_IMODE(keep.st_mode))

    try:  # the temp file of an existing file's copy starts private (0600)
        write_atomic(target, put, mode=0o600 if keep is not None else 0o666)
    except (OSError, pl.exceptions.PolarsError) as err:
        raise _write_error(path, err) from None


@contextlib.contextmanager
def writing_to(path: str | os.PathLike) -> Iterator[None]:
    """A block that writes ``path`` (makes a folder, or a file by other means than
    :func:`write_output`): an OSError, or Polars' error wrapping one, raised in it
    becomes the one message of every output nb writes, ``cannot write PATH: REASON``
    (the same OSError subclass and errno), as :func:`write_output` raises it.

    Raises:
        OSError: ``cannot write PATH: REASON``.
    """
    try:
        yield
    except (OSError, pl.exceptions.PolarsError) as err:
        raise _write_error(os.fspath(path), err) from None


def _write_in_place(path: str, write: Callable[[IO[bytes]], None]) -> None:
    """Open ``path`` (a device, FIFO, descriptor) for writing and stream into it."""
    try:
        with open(path, "wb") as f:
            write(f)
    except (OSError, pl.exceptions.PolarsError) as err:
        raise _write_error(path, err) from None


def _write_error(path: str, err: Exception) -> OSError:
    """``err`` (an OSError, or a Polars error wrapping one) as an OSError of the same
    kind whose message names ``path`` instead of the temp file: ``cannot write PATH:
    REASON``."""
    code, reason = (err.errno, err.strerror) if isinstance(err, OSError) else (None, None)
    if reason is None:  # from Polars: "...: underlying IO error: File too large (os error 27)"
        found = re.search(r"os error (\d+)", str(err))
        code = int(found.group(1)) if found else code
        reason = os.strerror(code) if code is not None else str(err)
    cls = type(err) if isinstance(err, OSError) else (_ERRNO_CLASSES.get(code, OSError) if code is not None else OSError)
    out = cls(f"cannot write {path}: {reason}")
    out.errno = code
    return out


_ERRNO_CLASSES = {errno.EACCES: PermissionError, errno.EPERM: PermissionError, errno.ENOENT: FileNotFoundError}


def _write(df: pl.DataFrame, f: IO[bytes], fmt: str, metadata: dict[str, str] | None = None) -> None:
    if fmt == "parquet":  # zstd level 1: fast and compact
        df.write_parquet(f, compression="zstd", compression_level=1, statistics=True, metadata=metadata)
    elif fmt == "csv":
        df.write_csv(f)
    else:
        f.write(_ndjson(df))


def _ndjson(df: pl.DataFrame) -> bytes:
    if not len(df):
        return b""
    bad = [
        c for c, t in df.schema.items()
        if t.is_float() and df.select((~pl.col(c).is_finite()).any()).item()
    ]
    if not bad:
        return df.write_ndjson().encode()
    # Build each line in Polars: the columns holding NaN/inf as JSON text of our own,
    # the others encoded by Polars, spliced back in the frame's column order.
    parts: list[pl.Expr] = []
    group: list[str] = []

    def close_group() -> None:
        if group:
            enc = pl.struct(list(group)).struct.json_encode()
            parts.append(enc.str.strip_prefix("{").str.strip_suffix("}"))
            group.clear()

    for c in df.columns:
        if c not in bad:
            group.append(c)
            continue
        close_group()
        col = pl.col(c)
        text = (
            pl.when(col.is_null()).then(pl.lit("null"))
            .when(col.is_nan()).then(pl.lit(f'"{json_number(math.nan)}"'))  # the format's one rule
            .when(col == math.inf).then(pl.lit(f'"{json_number(math.inf)}"'))
            .when(col == -math.inf).then(pl.lit(f'"{json_number(-math.inf)}"'))
            .otherwise(col.cast(pl.String))
        )
        parts.append(pl.lit(json.dumps(c) + ":") + text)
    close_group()
    lines = df.select(pl.lit("{") + pl.concat_str(parts, separator=",") + pl.lit("}")).to_series()
    return ("\n".join(lines.to_list()) + "\n").encode()


def hive_path(outdir: str | os.PathLike, project: str, run: str, rank: int) -> str:
    """``outdir/project=<p>/run=<r>/rank=<k>``, values percent-encoded as Hive does
    (anything but letters, digits and ``._-``)."""
    return os.path.join(
        os.fspath(outdir),
        f"project={quote(project, safe='')}",
        f"run={quote(run, safe='')}",
        f"rank={rank}",
    )


def refuse_linked_folders(outdir: str | os.PathLike, folder: str) -> None:
    """Check the folders nb makes inside an output folder before writing there.

    Raises:
        FileExistsError: a folder between ``outdir`` (which itself may be a symlink) and
            ``folder`` is a symlink: nb never writes through a link found there.
    """
    at = os.fspath(outdir)
    for part in os.path.relpath(folder, at).split(os.sep):
        at = os.path.join(at, part)
        if os.path.islink(at):
            raise FileExistsError(f"{at} is a symlink; nb makes the folders inside {os.fspath(outdir)} itself "
                                  "and does not write through links found there (remove it)")


def _rank_frames(reader: RunReader, kind: str, tags: str | Iterable[str] | None,
                 include_hidden: bool) -> Iterator[tuple[int, Iterator[pl.DataFrame]]]:
    """Each rank's frame of ``kind`` as pieces (:func:`read_frames`), rank after rank:
    scalars and timers decoded one rank and one piece at a time; system metrics and
    text read for every rank at once and split (small frames)."""
    if kind in _POINT_KINDS:
        for r in reader.ranks():
            yield r, read_frames(reader, kind, tags=tags, rank=r, include_hidden=include_hidden)
        return
    df = read_frame(reader, kind, tags=tags, all_ranks=True, include_hidden=include_hidden)
    for (r,), part in df.partition_by("rank", as_dict=True, maintain_order=True).items() if len(df) else []:
        yield int(r), iter([part])


KIND_KEY = "nb.kind"  # Parquet footer key of a dataset file: what it holds ("scalars", ...)


def dataset_kind(outdir: str | os.PathLike) -> str | None:
    """What the hive dataset in ``outdir`` holds (:data:`KIND_KEY` of its first file),
    or None: no dataset there, or one written without the key."""
    for folder, dirs, files in os.walk(os.fspath(outdir)):
        dirs.sort()
        if "part-0.parquet" in files:
            try:
                return pl.read_parquet_metadata(os.path.join(folder, "part-0.parquet")).get(KIND_KEY)
            except Exception:  # not a Parquet file we can read: say nothing about it
                return None
    return None


def export_root(
    root: str | os.PathLike,
    outdir: str | os.PathLike,
    kind: str = "scalars",
    *,
    project: str | None = None,
    tags: str | Iterable[str] | None = None,
    include_hidden: bool = False,
    on_run: Callable[[dict], None] | None = None,
) -> list[dict]:
    """Write every run under ``root`` (or of ``project``) as hive-partitioned Parquet.

    One file per run and rank: ``outdir/project=…/run=…/rank=…/part-0.parquet`` (the
    partition columns live in the folder names only; the kind in each file's footer,
    :data:`KIND_KEY`). Rewriting a run replaces its files. Read it back with ``pl.scan_parquet(outdir, hive_partitioning=True,
    hive_schema={"project": pl.String, "run": pl.String, "rank": pl.Int32})``.
    ``on_run`` is called with each run's result as it is written. Scalars and timers
    are streamed rank by rank and piece by piece (:func:`read_frames`).

    Returns:
        One dict per run: project, run, ranks (written), rows, files.

    Raises:
        FileExistsError: ``outdir`` holds a dataset of another kind.
        OSError: a folder or file cannot be written: ``cannot write PATH: REASON``.
    """
    if kind not in EXPORT_KINDS:
        raise ValueError(f"unknown kind {kind!r}; choose one of {', '.join(EXPORT_KINDS)}")
    other = dataset_kind(outdir)
    if other is not None and other != kind:
        raise FileExistsError(f"{os.fspath(outdir)} holds a dataset of {other}; export {kind} to another folder "
                              "(one dataset holds one kind: their columns differ, or their meaning does)")
    results = []
    for row in list_runs(root, project):
        reader = RunReader(row["path"])
        files, rows, ranks = [], 0, []
        for r, pieces in _rank_frames(reader, kind, tags, include_hidden):
            first = next(pieces)
            if not len(first):  # no rows on this rank: no file
                continue
            folder = hive_path(outdir, row["project"], row["id"], r)
            refuse_linked_folders(outdir, folder)
            try:
                os.makedirs(folder, exist_ok=True)
            except OSError as err:  # "cannot write FOLDER: Not a directory", as a file's error reads
                raise _write_error(folder, err) from None
            path = os.path.join(folder, "part-0.parquet")
            # nb's own file in nb's folder: a link planted there is replaced, never followed
            n, _ = write_frames((p.drop([c for c in HIVE_COLUMNS if c in p.columns]) for p in _chain(first, pieces)),
                                path, "parquet", metadata={KIND_KEY: kind}, follow_links=False)
            files.append(path)
            rows += n
            ranks.append(r)
        result = {"project": row["project"], "run": row["id"], "ranks": ranks, "rows": rows, "files": files}
        results.append(result)
        if on_run is not None:
            on_run(result)
    return results
