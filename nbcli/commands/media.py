"""``nb media RUN``: list a run's media, or write it out as files (PNG, JPEG, WAV, CSV)."""

from __future__ import annotations

import hashlib
import os
import re
from enum import Enum
from typing import IO, TYPE_CHECKING, Annotated

import typer

from nblog.reader.lowlevel import plural

from .._options import MAX_COUNT, AllowDamaged, Json, Rank, Root, RunArg, Tags
from .._output import Column, Output, data, emit_json, error, fmt_bytes, fmt_time, info, warn
from .._ranks import missing_rank

if TYPE_CHECKING:
    import polars as pl

    from nblog import RunReader


class Kind(str, Enum):
    image = "image"
    histogram = "histogram"
    audio = "audio"


_EXT = {"png": ".png", "jpeg": ".jpg", "wav": ".wav", "histogram": ".csv"}
_SAFE = re.compile(r"[^A-Za-z0-9._@+=,-]")
_STATS = ("num", "min", "max", "sum", "sum_squares", "nan", "pos_inf", "neg_inf")
_FLOAT_STATS = frozenset({"min", "max", "sum", "sum_squares"})


def _component(part: str) -> str:
    """One tag group as a file-name component: safe characters only, never . or ..."""
    safe = _SAFE.sub("_", part)[:100]
    return safe if safe.strip(".") else "_" * max(1, len(safe))  # "", ".", ".." never


def tag_path(tag: str) -> str:
    """The relative folder of a tag's files: one folder per ``/`` group, characters
    outside ``A-Za-z0-9._@+=,-`` replaced by ``_``; a tag that had to change gets
    ``~`` and 8 hex digits of its SHA-1, so two tags never share a folder."""
    parts = [_component(p) for p in tag.split("/")]
    if "/".join(parts) != tag:
        parts[-1] += "~" + hashlib.sha1(tag.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return os.path.join(*parts)


def media(
    run: RunArg,
    output: Annotated[
        str | None,
        typer.Option("--output", "-o", metavar="DIR",
                     help="Write the files under DIR (created if missing); without -o, list the records.",
                     show_default=False),
    ] = None,
    tags: Tags = None,
    step: Annotated[
        int | None,
        typer.Option("--step", "-s", min=0, max=MAX_COUNT, metavar="N", help="Only records logged at step N.", show_default=False),
    ] = None,
    rank: Rank = 0,
    kind: Annotated[
        Kind | None,
        typer.Option("--kind", "-k", help="Only this kind of media.", show_default=False),
    ] = None,
    include_hidden: Annotated[
        bool,
        typer.Option("--include-hidden", help="Also records hidden by a later session's restart."),
    ] = False,
    root: Root = None,
    allow_damaged: AllowDamaged = False,
    as_json: Json = False,
) -> None:
    """List a run's images, histograms and audio, or write them out with -o DIR.

    Files are DIR/TAG/step_NNNNNN.EXT, one folder per '/' group of the tag: PNG or JPEG
    images as they were stored, WAV audio (16-bit PCM), histograms as CSV with columns
    bin_left, bin_right, count, then the record's num, min, max, sum, sum_squares, nan,
    pos_inf, neg_inf on every row. Existing files of the same name are replaced (written
    to a temp file and renamed: a symlink found in DIR is replaced, never followed). The
    paths written go to stdout (with --json: one object per file); a blob that fails
    its checksum is reported, skipped, and makes the exit code 1.
    """
    from nblog.reader import RunReader, tag_matcher
    from nblog.reader.lowlevel import MEDIA_SCHEMA

    reader = RunReader(run, root)
    no_log = missing_rank(reader.dir, rank)
    if no_log is not None:
        error(no_log[0], "pick one of those with --rank K" if no_log[1] else None)
        raise typer.Exit(1)
    df = reader.media(rank=rank, kind=kind.value if kind else None, include_hidden=include_hidden)
    if tags:
        match = tag_matcher(tags)
        df = df.filter(df["tag"].is_in([t for t in df["tag"].unique().to_list() if match(t)]))
    if step is not None:
        df = df.filter(df["step"] == step)
    if output is None:
        _list(df, as_json, list(MEDIA_SCHEMA))
        return
    if not len(df):
        info("no media matches" if (tags or step is not None or kind) else "no media logged on this rank")
        return
    _write(reader, df, output, as_json)


def _list(df: pl.DataFrame, as_json: bool, columns: list[str]) -> None:
    rows = df.select([c for c in columns if c != "meta"] + (["hidden"] if "hidden" in df.columns else []))
    if as_json:
        emit_json(rows.to_dicts())
        return
    if not len(df):
        info("no media matches")
        return
    Output().table(
        [Column("TAG"), Column("STEP", True), Column("KIND"), Column("FORMAT"), Column("SIZE", True),
         Column("DETAIL"), Column("SESSION", True), Column("LOGGED")],
        ([data(r["tag"], "bold"), r["step"], r["kind"], r["format"], fmt_bytes(r["length"]), _detail(r),
          r["session"], fmt_time(r["wall_time"])] for r in rows.iter_rows(named=True)),
    )


def _detail(r: dict) -> str:
    if r["kind"] == "image":
        return f"{r['width']}x{r['height']}x{r['channels']}"
    if r["kind"] == "audio":
        return f"{r['channels']}ch {r['sample_rate']} Hz"
    if r["kind"] == "histogram":
        return plural(r["bins"], "bin")
    return "-"


def _write(reader: RunReader, df: pl.DataFrame, output: str, as_json: bool) -> None:
    import json

    import polars as pl

    from nblog import NbError
    from nblog.reader import decode_histogram
    from nblog.reader.lowlevel import refuse_linked_folders, write_output, writing_to

    width = max(6, len(str(df["step"].max())))
    used: set[str] = set()
    written, failed = [], 0
    out = Output()
    for row in df.iter_rows(named=True):
        try:
            blob = reader.media_bytes(row)  # verified against the reference and checksums
        except (NbError, OSError) as err:  # skipped; the other records are still written
            failed += 1
            warn(str(err))
            continue
        ext = _EXT.get(row["format"], ".bin")
        folder = os.path.join(output, tag_path(row["tag"]))
        base = os.path.join(folder, f"step_{row['step']:0{width}d}")
        path, n = base + ext, 1
        while path in used:  # the same tag and step twice (or a hidden record)
            n += 1
            path = f"{base}_{n}{ext}"
        used.add(path)
        refuse_linked_folders(output, folder)
        with writing_to(folder):  # "cannot write DIR/TAG: Read-only file system"
            os.makedirs(folder, exist_ok=True)
        if row["format"] == "histogram":
            edges, counts = decode_histogram(blob)
            meta = json.loads(row["meta"])
            frame = pl.DataFrame({"bin_left": edges[:-1], "bin_right": edges[1:], "count": counts}).with_columns(
                [pl.lit(meta.get(k), dtype=pl.Float64 if k in _FLOAT_STATS else pl.Int64).alias(k) for k in _STATS]
            )
            write_output(path, frame.write_csv, follow_links=False)
        else:
            # temp file + rename: a symlink planted in DIR is replaced, never written through
            def put(f: IO[bytes], blob: bytes = blob) -> None:
                f.write(blob)

            write_output(path, put, follow_links=False)
        written.append({"path": path, "tag": row["tag"], "step": row["step"], "rank": row["rank"],
                        "session": row["session"], "kind": row["kind"], "format": row["format"],
                        "caption": row["caption"], "wall_time": row["wall_time"]})
        if not as_json:
            out.line(data(path))
    if as_json:
        emit_json(written)
    info(f"wrote {plural(len(written), 'file')} under {output}")
    if failed:
        raise NbError(f"{plural(failed, 'media record')} could not be read and "
                      f"{'were' if failed != 1 else 'was'} skipped")


def register(app: typer.Typer) -> None:
    app.command("media")(media)
