"""A synthetic run with media, fixed bytes and fixed times (for the media view's
snapshots and Pilot tests), written with nblog's format and pack encoders.

Project ``vis``, run ``vis-0000cafe``, one rank, one session, steps 0–39:
- ``img/pred``: 32×24 RGB gradients at steps 0, 10, 20 (caption with markup-like text);
- ``img/checker``: a 16×16 grey checkerboard at step 20;
- ``hist/weights``: a histogram at steps 0, 5, ..., 35 whose values widen and drift
  (three NaN at step 35);
- ``audio/tone``: half a second of a 440 Hz tone at step 10;
- ``broken/img``: a reference past the end of the pack (a torn blob).
"""

from __future__ import annotations

import io
import json
import os
import wave

import numpy as np
from nbtui_synth import WALL0, EventFile
from PIL import Image

from nblog.format import _format as F
from nblog.format import _pack as P
from nblog.format._filenames import pack_file_name
from nblog.media._media_encode import histogram_stats

RUN_ID = "vis-0000cafe"
CAPTION = "pred [bold]not markup[/bold]"
IMAGE_STEPS = (0, 10, 20)
HIST_STEPS = tuple(range(0, 40, 5))


def gradient(step: int) -> np.ndarray:
    """The ``img/pred`` pixels at ``step``: 24 rows × 32 columns × RGB, uint8."""
    y, x = np.mgrid[0:24, 0:32]
    r = (x * 255 // 31).astype(np.uint8)
    g = (y * 255 // 23).astype(np.uint8)
    b = np.full_like(r, (step * 12) % 256)
    return np.stack([r, g, b], axis=2)


def checker() -> np.ndarray:
    y, x = np.mgrid[0:16, 0:16]
    return np.where((x // 4 + y // 4) % 2 == 0, 230, 40).astype(np.uint8)


def hist_values(step: int) -> np.ndarray:
    """The values histogrammed at ``step`` (deterministic, bell-shaped)."""
    x = np.tan(np.linspace(-1.35, 1.35, 2000)) * (0.5 + step / 40) + step / 20
    if step == 35:
        x = np.concatenate([x, [np.nan] * 3])
    return x


def png(pixels: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="PNG")
    return buf.getvalue()


def wav() -> bytes:
    t = np.arange(4000) / 8000
    pcm = np.rint(np.sin(2 * np.pi * 440 * t) * 0.5 * 32767).astype("<i2")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(pcm.tobytes())
    return buf.getvalue()


class Pack:
    """``media.r0.pack`` written blob by blob; :meth:`add` returns (offset, length).
    ``new=False`` appends to an existing pack (as a writer's next batch does)."""

    def __init__(self, path: str, new: bool = True):
        self.path = path
        if new:
            with open(path, "wb") as f:
                f.write(P.pack_header())

    def add(self, kind: int, payload: bytes) -> tuple[int, int]:
        with open(self.path, "ab") as f:
            f.write(P.blob_header(kind, payload))
            offset = f.tell()
            f.write(payload)
        return offset, len(payload)


def media(ef: EventFile, tag: str, step: int, offset: int, length: int, meta: dict) -> None:
    tid = ef.tag(F.KIND_MEDIA, tag)
    ef._append(F.frame(F.FRAME_MEDIA, F.encode_media([(step, tid, step * 1000, offset, length, meta)])))


def add_image(ef: EventFile, pack: Pack, tag: str, step: int, pixels: np.ndarray, caption: str | None = None) -> None:
    off, n = pack.add(P.BLOB_PNG, png(pixels))
    meta = {"kind": "image", "format": "png", "width": int(pixels.shape[1]), "height": int(pixels.shape[0]),
            "channels": 1 if pixels.ndim == 2 else int(pixels.shape[2])}
    if caption is not None:
        meta["caption"] = caption
    media(ef, tag, step, off, n, meta)


def write_media_run(root: str) -> str:
    """Write the run under ``root``; returns its folder."""
    run_dir = os.path.join(root, "vis", RUN_ID)
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "run.json"), "w") as f:
        json.dump({"format_version": F.FORMAT_VERSION, "project": "vis", "id": RUN_ID, "name": "media",
                   "created": WALL0, "world_size": 1, "status": "finished",
                   "sessions": [{"session": 0, "start": WALL0, "last_step": 39, "end": WALL0 + 40}]}, f)
    ef = EventFile(os.path.join(run_dir, "events.r0.s0.log"), {
        "format_version": F.FORMAT_VERSION, "project": "vis", "run_id": RUN_ID, "rank": 0, "local_rank": 0,
        "world_size": 1, "session": 0, "host": "node-a", "pid": 1000, "wall_start": WALL0})
    pack = Pack(os.path.join(run_dir, pack_file_name(0)))
    st = np.arange(40)
    ef.points(F.KIND_SCALAR, "train/loss", st, 1.0 / (st + 1), st * 1000)
    for step in range(40):
        if step in IMAGE_STEPS:
            add_image(ef, pack, "img/pred", step, gradient(step), CAPTION)
        if step == 20:
            add_image(ef, pack, "img/checker", step, checker())
        if step in HIST_STEPS:
            edges, counts, stats = histogram_stats(hist_values(step), 16)
            off, n = pack.add(P.BLOB_HISTOGRAM, edges.tobytes() + counts.tobytes())
            media(ef, "hist/weights", step, off, n, {"kind": "histogram", "format": "histogram", "bins": 16, **stats})
        if step == 10:
            off, n = pack.add(P.BLOB_WAV, wav())
            media(ef, "audio/tone", step, off, n, {"kind": "audio", "format": "wav", "sample_rate": 8000,
                                                   "channels": 1, "samples": 4000, "duration_s": 0.5})
        if step == 30:
            media(ef, "broken/img", step, os.path.getsize(pack.path) + 100, 50,
                  {"kind": "image", "format": "png", "width": 8, "height": 8, "channels": 3})
    ef.end(39_000)
    return run_dir


ODD_RUN_ID = "odd-0000beef"
LONG_TAG = "experiments/" + "very_long_component_name/" * 8 + "final_image"
ONE_BIN = np.linspace(-0.5, 2.002, 500)  # one bin from -0.5 to 2.002
MANY_STEPS = tuple(range(20))


def add_histogram(ef: EventFile, pack: Pack, tag: str, step: int, values, bins) -> None:
    edges, counts, stats = histogram_stats(np.asarray(values, np.float64), bins)
    off, n = pack.add(P.BLOB_HISTOGRAM, edges.tobytes() + counts.tobytes())
    media(ef, tag, step, off, n, {"kind": "histogram", "format": "histogram", "bins": len(counts), **stats})


def write_odd_media_run(root: str) -> str:
    """A run of media that are hard to lay out (project ``vis``, run ``odd-0000beef``):
    ``hist/one`` (one bin), ``hist/nan`` (every value NaN), ``hist/fine`` (100,000
    bins), ``hist/many`` (20 steps, for the heat strip's grouping) and an image under
    :data:`LONG_TAG` with a caption."""
    run_dir = os.path.join(root, "vis", ODD_RUN_ID)
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "run.json"), "w") as f:
        json.dump({"format_version": F.FORMAT_VERSION, "project": "vis", "id": ODD_RUN_ID, "name": "odd",
                   "created": WALL0, "world_size": 1, "status": "finished",
                   "sessions": [{"session": 0, "start": WALL0, "last_step": 19, "end": WALL0 + 20}]}, f)
    ef = EventFile(os.path.join(run_dir, "events.r0.s0.log"), {
        "format_version": F.FORMAT_VERSION, "project": "vis", "run_id": ODD_RUN_ID, "rank": 0, "local_rank": 0,
        "world_size": 1, "session": 0, "host": "node-a", "pid": 1000, "wall_start": WALL0})
    pack = Pack(os.path.join(run_dir, pack_file_name(0)))
    add_histogram(ef, pack, "hist/one", 0, ONE_BIN, 1)
    add_histogram(ef, pack, "hist/nan", 0, np.full(10, np.nan), 10)
    add_histogram(ef, pack, "hist/fine", 0, hist_values(0), 100_000)
    for step in MANY_STEPS:
        add_histogram(ef, pack, "hist/many", step, hist_values(step), 16)
    add_image(ef, pack, LONG_TAG, 7, gradient(7), "the caption")
    ef.end(19_000)
    return run_dir
