"""What the media view reads, in a worker thread: the media records of a rank and the
content of the highlighted one (an image, every histogram of a tag, or facts about an
audio clip), through :class:`nblog.RunReader`'s media API.

The reader is opened the first time the media view asks (a viewer that never shows
media never reads media references twice); each refresh reads only what was appended.
A blob that cannot be read (torn, missing, failing its checksum, not an image) gives
a message, never an exception.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from nblog.reader.lowlevel import plural

from .widgets.histogram import HistogramData

if TYPE_CHECKING:
    from PIL import Image

    from nblog import RunReader

#: Records listed per tag (the newest; ``nb media`` writes them all).
PER_TAG = 1000


@dataclass(frozen=True)
class MediaRecord:
    """One media record of :meth:`nblog.RunReader.media`, without its bytes.

    ``kind``: "image", "histogram" or "audio"; ``width``/``height`` in pixels (images),
    ``sample_rate`` in Hz and ``length`` in bytes; None where a kind has none.
    """

    rank: int
    session: int
    step: int
    tag: str
    kind: str
    format: str | None
    offset: int
    length: int
    width: int | None = None
    height: int | None = None
    channels: int | None = None
    sample_rate: int | None = None
    bins: int | None = None
    caption: str | None = None
    meta: str = "{}"

    @property
    def key(self) -> tuple:
        """Identifies the record among the rank's records: (tag, session, step, offset)."""
        return (self.tag, self.session, self.step, self.offset)

    def row(self) -> dict:
        """The record as the row dict :meth:`nblog.RunReader.media_bytes` takes."""
        return {"rank": self.rank, "session": self.session, "offset": self.offset, "length": self.length,
                "kind": self.kind}


@dataclass
class MediaData:
    """The media view's data for one request.

    Attributes:
        rank: the rank shown.
        records: the records, by tag then as logged (at most :data:`PER_TAG` per tag).
        omitted: per tag, older records left out of ``records``.
        selected: key of the record shown (None: nothing selected or no media).
        record: that record.
        image: a loaded ``PIL.Image.Image`` for an image record.
        histogram: every histogram of the selected histogram's tag.
        message: what to say instead of (or about) the content; ``error`` when it is a
            failure (a blob that could not be read).
    """

    rank: int
    records: list[MediaRecord] = field(default_factory=list)
    omitted: dict[str, int] = field(default_factory=dict)
    selected: tuple | None = None
    record: MediaRecord | None = None
    image: Image.Image | None = None
    histogram: HistogramData | None = None
    message: str | None = None
    error: bool = False


def _record(row: dict) -> MediaRecord:
    fields: dict[str, Any] = {k: row.get(k) for k in MediaRecord.__dataclass_fields__}
    return MediaRecord(**fields)


class MediaSource:
    """The media of one run folder, read through a :class:`nblog.RunReader`."""

    def __init__(self, run_dir: str):
        self.run_dir = run_dir
        self._reader: RunReader | None = None
        self._records: dict[int, list[MediaRecord]] = {}
        self._hist: dict[tuple, HistogramData] = {}
        self.problem: str | None = None  # why the records could not be read, if they could not

    @property
    def reader(self) -> RunReader:
        """The :class:`nblog.RunReader` of the run (opened on first use)."""
        if self._reader is None:
            from nblog import RunReader

            self._reader = RunReader(self.run_dir)
        return self._reader

    def refresh(self) -> bool:
        """Read what was appended; True if anything was."""
        if self._reader is None:
            return False
        try:
            changed = self._reader.refresh()
        except Exception:  # noqa: BLE001 - the next read says what is wrong
            self._records.clear()
            return True
        if changed:
            self._records.clear()
        return changed

    def records(self, rank: int) -> list[MediaRecord]:
        """Every visible media record of ``rank``, by tag, then as logged."""
        if rank not in self._records:
            self.problem = None
            try:
                frame = self.reader.media(rank=rank)
            except Exception as e:  # noqa: BLE001 - a viewer says it, never crashes
                frame, self.problem = None, f"could not read the media of rank {rank}: {e}"
            rows = [] if frame is None else [_record(r) for r in frame.iter_rows(named=True)]
            rows.sort(key=lambda r: r.tag)  # stable: each tag's records stay in logged order
            self._records[rank] = rows
        return self._records[rank]

    def view(self, rank: int, selected: tuple | None) -> MediaData:
        """The records of ``rank`` and the content of ``selected``: a record key, or
        ``(tag,)`` for a tag (its newest record); None: the first tag's newest."""
        every = self.records(rank)
        by_tag: dict[str, list[MediaRecord]] = {}
        for r in every:
            by_tag.setdefault(r.tag, []).append(r)
        shown, omitted = [], {}
        for tag, recs in by_tag.items():
            if len(recs) > PER_TAG:
                omitted[tag] = len(recs) - PER_TAG
            shown.extend(recs[-PER_TAG:])
        data = MediaData(rank, shown, omitted)
        if not every:
            if self.problem:
                data.message, data.error = self.problem, True
            else:
                data.message = f"rank {rank} logged no media (run.add_image, add_histogram, add_audio, add_figure)"
            return data
        record = self._find(by_tag, selected)
        data.record = record
        data.selected = record.key
        if record.kind == "image":
            try:
                data.image = self.reader.image(record.row())
            except Exception as e:  # noqa: BLE001 - a broken blob or image is said, never raised
                data.message, data.error = f"step {record.step}: the image could not be read: {e}", True
        elif record.kind == "histogram":
            hist = self._histograms(rank, by_tag[record.tag])  # shared by requests: copied
            at = hist.keys.index(record.key) if record.key in hist.keys else -1
            data.histogram = replace(hist, selected=at)
            if at < 0:
                data.message, data.error = f"step {record.step}: this histogram could not be read", True
        elif record.kind == "audio":
            meta = _meta(record)
            secs = meta.get("duration_s")
            data.message = (
                f"audio: {f'{secs:.2f} s, ' if isinstance(secs, (int, float)) else ''}"
                f"{record.sample_rate or '?'} Hz, "
                f"{plural(record.channels, 'channel') if record.channels else '? channels'}, "
                f"{plural(record.length, 'byte', sep=True)}"
                " — nb media RUN --tag TAG -o DIR writes the WAV files"
            )
        else:
            data.message = f"{record.kind or 'unknown'} media: nothing to show here"
        return data

    @staticmethod
    def _find(by_tag: dict[str, list[MediaRecord]], selected: tuple | None) -> MediaRecord:
        if selected:
            recs = by_tag.get(selected[0])
            if recs:
                if len(selected) == 1:
                    return recs[-1]
                for r in reversed(recs):
                    if r.key == selected:
                        return r
                # gone (hidden by a resume): the nearest step of the tag
                return min(recs, key=lambda r: abs(r.step - selected[2]))
        return next(iter(by_tag.values()))[-1]

    def _histograms(self, rank: int, recs: list[MediaRecord]) -> HistogramData:
        """Every histogram of the tag of ``recs`` (cached until the records change)."""
        cache_key = (rank, recs[0].tag, len(recs), recs[-1].key)
        data = self._hist.get(cache_key)
        if data is None:
            data = self._hist[cache_key] = self._read_histograms(rank, recs)
            while len(self._hist) > 16:
                self._hist.pop(next(iter(self._hist)))
        return data

    def _read_histograms(self, rank: int, recs: list[MediaRecord]) -> HistogramData:
        """All at once with :meth:`RunReader.histograms`; one by one when a blob is
        broken (the readable ones are shown, the others counted)."""
        tag = recs[0].tag
        try:
            frame = self.reader.histograms(tag, rank=rank)
            first = np.flatnonzero(frame["bin"].to_numpy() == 0)
            if len(first) != len(recs):
                raise ValueError("histogram frame and records disagree")
        except Exception:  # noqa: BLE001 - a broken blob: read them one by one
            return self._one_by_one(recs)
        left, right = frame["bin_left"].to_numpy(), frame["bin_right"].to_numpy()
        count = frame["count"].to_numpy()
        ends = np.append(first[1:], len(frame))
        edges = [np.append(left[a:b], right[b - 1]) for a, b in zip(first, ends, strict=True)]
        counts = [count[a:b] for a, b in zip(first, ends, strict=True)]
        return HistogramData(tag, np.asarray([r.step for r in recs], np.int64), edges, counts,
                             [_meta(r) for r in recs], keys=[r.key for r in recs])

    def _one_by_one(self, recs: list[MediaRecord]) -> HistogramData:
        kept, edges, counts = [], [], []
        for r in recs:
            try:
                e, c = self.reader.histogram(r.row())
            except Exception:  # noqa: BLE001 - counted and said, never raised
                continue
            kept.append(r)
            edges.append(np.asarray(e, np.float64))
            counts.append(np.asarray(c, np.int64))
        return HistogramData(recs[0].tag, np.asarray([r.step for r in kept], np.int64), edges, counts,
                             [_meta(r) for r in kept], keys=[r.key for r in kept],
                             unreadable=len(recs) - len(kept))


def _meta(record: MediaRecord) -> dict:
    try:
        meta = json.loads(record.meta or "{}")
    except ValueError:
        return {}
    return meta if isinstance(meta, dict) else {}
