"""Media encoding, in the writer thread: copied arrays → PNG, WAV and histogram blobs.

The caller's thread (``_media``) validates and copies; what is expensive happens here:
layout changes, conversion to 8 or 16 bits, PNG compression (Pillow, imported on the
first image), WAV framing (the standard library's ``wave``), histogram statistics
(numpy, in bulk). Each ``encode_*`` returns ``(blob type, payload, meta)``; ``meta``
is the JSON object stored with the reference in the event log.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

from ..format import _pack as P

if TYPE_CHECKING:
    from types import ModuleType

    import numpy as np

PNG_COMPRESS_LEVEL = 3  # zlib level: lossless either way; 6 (Pillow's default) is ~2x slower
GRID_COLUMNS = 8  # as torch.utils.tensorboard's make_grid


class Job:
    """One queued media item: what the caller copied, and how to encode it."""

    __slots__ = ("kind", "data", "opts", "nbytes", "pooled")

    def __init__(self, kind: str, data: Any, opts: dict, nbytes: int, pooled: bool = False) -> None:
        self.kind = kind
        self.data = data  # the caller's copy: an array, a PIL image or bytes, by kind
        self.opts = opts
        self.nbytes = nbytes
        self.pooled = pooled  # data is a private numpy array, reusable once encoded


def encode(job: Job) -> tuple[int, bytes, dict]:
    """Encode one job; raises on data that cannot be encoded (the sink counts it)."""
    return _ENCODERS[job.kind](job)


# -- images ------------------------------------------------------------------------


def to_uint8(a: np.ndarray) -> np.ndarray:
    """uint8 as is; bool → 0/255; float → ``rint(x * 255)`` clipped to 0–255."""
    import numpy as np

    if a.dtype == np.uint8:
        return a
    if a.dtype == np.bool_:
        return a.astype(np.uint8) * np.uint8(255)
    x = np.rint(a.astype(np.float64) * 255.0)
    np.clip(x, 0.0, 255.0, out=x)
    return x.astype(np.uint8)


def _png(pixels: np.ndarray, opts: dict, **extra: Any) -> tuple[int, bytes, dict]:
    """HW or HWC (C in 1, 3, 4) uint8 → PNG."""
    import numpy as np
    from PIL import Image

    if pixels.ndim == 3 and pixels.shape[2] == 1:
        pixels = pixels[:, :, 0]
    img = Image.fromarray(np.ascontiguousarray(pixels))
    buf = io.BytesIO()
    img.save(buf, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
    height, width = pixels.shape[:2]
    meta = {
        "kind": "image",
        "format": "png",
        "width": int(width),
        "height": int(height),
        "channels": 1 if pixels.ndim == 2 else int(pixels.shape[2]),
        **extra,
    }
    if opts.get("caption") is not None:
        meta["caption"] = opts["caption"]
    return P.BLOB_PNG, buf.getvalue(), meta


def _encode_array(job: Job) -> tuple[int, bytes, dict]:
    import numpy as np

    a = np.transpose(job.data, job.opts["perm"])
    return _png(to_uint8(a), job.opts)


def grid(batch: np.ndarray) -> tuple[np.ndarray, int, int]:
    """N×H×W[×C] uint8 → one image, ``min(N, 8)`` columns, row-major, black padding."""
    import numpy as np

    n, h, w = batch.shape[:3]
    cols = min(n, GRID_COLUMNS)
    rows = -(-n // cols)
    canvas = np.zeros((rows * h, cols * w) + batch.shape[3:], dtype=batch.dtype)
    for i in range(n):
        r, c = divmod(i, cols)
        canvas[r * h : (r + 1) * h, c * w : (c + 1) * w] = batch[i]
    return canvas, rows, cols


def _encode_batch(job: Job) -> tuple[int, bytes, dict]:
    import numpy as np

    batch = to_uint8(np.transpose(job.data, job.opts["perm"]))
    pixels, rows, cols = grid(batch)
    return _png(
        pixels,
        job.opts,
        images=int(batch.shape[0]),
        rows=rows,
        cols=cols,
        cell_width=int(batch.shape[2]),
        cell_height=int(batch.shape[1]),
    )


def _encode_figure(job: Job) -> tuple[int, bytes, dict]:
    rgba = job.data  # H×W×4 uint8, rendered by Agg in the caller's thread
    if job.opts.get("batch"):
        pixels, rows, cols = grid(rgba)
        if (pixels[..., 3] == 255).all():
            pixels = pixels[..., :3]
        return _png(pixels, job.opts, source="figure", images=int(rgba.shape[0]), rows=rows, cols=cols,
                    cell_width=int(rgba.shape[2]), cell_height=int(rgba.shape[1]))
    if (rgba[..., 3] == 255).all():
        rgba = rgba[..., :3]
    return _png(rgba, job.opts, source="figure")


_PNG_MODES = frozenset({"1", "L", "LA", "P", "RGB", "RGBA", "I", "I;16"})


def _encode_pil(job: Job) -> tuple[int, bytes, dict]:
    img = job.data
    if img.mode not in _PNG_MODES:
        img = img.convert("RGBA" if "A" in img.getbands() else "RGB")
    buf = io.BytesIO()
    img.save(buf, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
    meta = {
        "kind": "image",
        "format": "png",
        "width": img.size[0],
        "height": img.size[1],
        "channels": len(img.getbands()),
        "mode": img.mode,
    }
    if job.opts.get("caption") is not None:
        meta["caption"] = job.opts["caption"]
    return P.BLOB_PNG, buf.getvalue(), meta


def _encode_encoded(job: Job) -> tuple[int, bytes, dict]:
    data: bytes = job.data
    fmt = job.opts["format"]
    width, height, channels = job.opts.get("width"), job.opts.get("height"), job.opts.get("channels")
    if fmt == "jpeg":  # read the size from the header (Pillow reads no pixels here)
        from PIL import Image, JpegImagePlugin

        # The JPEG reader itself, not Image.open: no DecompressionBombWarning on the
        # user's stderr for a large one (refused just below, counted and warned once).
        with JpegImagePlugin.JpegImageFile(io.BytesIO(data)) as img:
            width, height = img.size
            channels = len(img.getbands())
        limit = Image.MAX_IMAGE_PIXELS
        if limit is not None and width * height > limit:
            raise ValueError(f"a JPEG image of {width}x{height} = {width * height} pixels is larger than "
                             f"Pillow opens (PIL.Image.MAX_IMAGE_PIXELS = {limit})")
    meta = {"kind": "image", "format": fmt, "width": width, "height": height, "channels": channels}
    if job.opts.get("caption") is not None:
        meta["caption"] = job.opts["caption"]
    return (P.BLOB_JPEG if fmt == "jpeg" else P.BLOB_PNG), data, meta


def png_size(data: bytes) -> tuple[int, int, int] | None:
    """(width, height, channels) from a PNG's IHDR chunk, or None if it has none."""
    if len(data) < 26 or data[12:16] != b"IHDR":
        return None
    width = int.from_bytes(data[16:20], "big")
    height = int.from_bytes(data[20:24], "big")
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}.get(data[25])
    if not width or not height or channels is None:
        return None
    return width, height, channels


# -- histograms --------------------------------------------------------------------


def histogram_stats(values: np.ndarray, bins: int | str | np.ndarray) -> tuple[np.ndarray, np.ndarray, dict]:
    """(edges f8, counts i8, stats) of ``values``; NaN and ±inf counted, not binned.

    Stats: ``num`` finite values (all of them; with explicit edges, those outside
    the edges are in no bin), ``min``, ``max``, ``sum``, ``sum_squares``
    (float64 sums of the finite values, ±inf when they overflow float64; min and max
    are None when none is finite), ``nan``, ``pos_inf``, ``neg_inf``.

    Bins are those of ``numpy.histogram`` wherever numpy can make them. Where it
    cannot, they are made without overflow: a range wider than the largest float64
    (values near ±1.8e308) gets its edges from the halved values, doubled back
    (exact); a range too narrow for the bins asked (a few units in the last place)
    gets as many equal-width bins as distinct float64 edges fit in it (at least
    one). numpy's floating-point warnings are silenced here (never on the user's
    stderr).
    """
    import numpy as np

    x = values.reshape(-1)
    nan = pos_inf = neg_inf = 0
    with np.errstate(all="ignore"):
        if x.dtype.kind == "f":
            finite = np.isfinite(x)
            n_finite = int(np.count_nonzero(finite))
            if n_finite != x.size:
                nan = int(np.count_nonzero(np.isnan(x)))
                pos_inf = int(np.count_nonzero(x == np.inf))
                neg_inf = x.size - n_finite - nan - pos_inf
                x = x[finite]
        x = x.astype(np.float64, copy=False)
        counts, edges = _histogram(np, x, bins)
        stats = {
            "num": int(x.size),
            "min": float(x.min()) if x.size else None,
            "max": float(x.max()) if x.size else None,
            "sum": float(x.sum()),
            "sum_squares": float(np.dot(x, x)),
            "nan": nan,
            "pos_inf": pos_inf,
            "neg_inf": neg_inf,
        }
    return edges.astype("<f8"), counts.astype("<i8"), stats


def _histogram(np: ModuleType, x: np.ndarray, bins: int | str | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``numpy.histogram(x, bins)``, also where numpy's edges overflow or collapse."""
    if isinstance(bins, np.ndarray) or not x.size:  # explicit edges: numpy never subtracts
        return np.histogram(x, bins=bins)
    lo, hi = float(x.min()), float(x.max())
    edges = None
    if np.isfinite(hi - lo) and (lo != hi or lo - 0.5 < hi + 0.5):
        try:
            counts, edges = np.histogram(x, bins=bins)
            if len(edges) >= 2 and np.isfinite(edges).all() and (edges[1:] > edges[:-1]).all():
                return counts, edges
        except Exception:  # "Too many bins for data range": edges closer than float64 holds
            pass
        edges = None
    else:  # hi - lo overflows: numpy's edges would be inf and NaN; halving is exact this large
        try:
            edges = np.histogram_bin_edges(x * 0.5, bins=bins) * 2.0
        except Exception:
            edges = None
    if edges is None or len(edges) < 2 or not np.isfinite(edges).all() or not (edges[1:] > edges[:-1]).all():
        # int bins: that many equal widths; a rule numpy cannot apply: Sturges' count
        n = bins if isinstance(bins, int) else int(np.ceil(np.log2(x.size))) + 1
        edges = _equal_edges(np, lo, hi, n)
    else:
        edges[0], edges[-1] = lo, hi
    return np.histogram(x, bins=edges)


def _equal_edges(np: ModuleType, lo: float, hi: float, n: int) -> np.ndarray:
    """Up to ``n`` + 1 strictly increasing float64 edges, equal widths from lo to hi (as
    numpy's, ±0.5 around a single value), fewer where float64 has no more between."""
    if lo == hi:
        a, b = lo - 0.5, hi + 0.5
        if a == lo:  # a value so large that 0.5 is nothing: the neighbouring floats
            a = float(np.nextafter(lo, -np.inf))
            a = lo if np.isinf(a) else a
        if b == hi:
            b = float(np.nextafter(hi, np.inf))
            b = hi if np.isinf(b) else b
        lo, hi = a, b
    if np.isfinite(hi - lo):
        edges = np.linspace(lo, hi, n + 1)
    else:
        edges = np.linspace(lo * 0.5, hi * 0.5, n + 1) * 2.0
    edges = np.unique(edges)
    edges[0], edges[-1] = lo, hi
    return edges


def _encode_histogram(job: Job) -> tuple[int, bytes, dict]:
    edges, counts, stats = histogram_stats(job.data, job.opts["bins"])
    meta = {"kind": "histogram", "format": "histogram", "bins": int(len(counts)), **stats}
    return P.BLOB_HISTOGRAM, edges.tobytes() + counts.tobytes(), meta


def decode_histogram(payload: bytes) -> tuple[np.ndarray, np.ndarray]:
    """(edges float64 [bins+1], counts int64 [bins]) from a histogram blob."""
    import numpy as np

    if len(payload) < 24 or (len(payload) - 8) % 16:
        raise ValueError(f"a histogram blob of {len(payload)} bytes is malformed")
    bins = (len(payload) - 8) // 16
    edges = np.frombuffer(payload, dtype="<f8", count=bins + 1)
    counts = np.frombuffer(payload, dtype="<i8", offset=8 * (bins + 1), count=bins)
    return edges, counts


# -- audio ---------------------------------------------------------------------------


def to_pcm16(samples: np.ndarray) -> np.ndarray:
    """int16 as is; float → ``rint(clip(x, -1, 1) * 32767)`` as int16."""
    import numpy as np

    if samples.dtype == np.int16:
        return samples
    x = np.clip(samples.astype(np.float64), -1.0, 1.0) * 32767.0
    return np.rint(x).astype(np.int16)


def _encode_audio(job: Job) -> tuple[int, bytes, dict]:
    import wave

    import numpy as np

    a = job.data
    if a.ndim == 1:
        a = a[None, :]
    pcm = to_pcm16(a)  # channels × samples
    channels, n = pcm.shape
    rate = job.opts["sample_rate"]
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.ascontiguousarray(pcm.T).astype("<i2", copy=False).tobytes())
    meta = {
        "kind": "audio",
        "format": "wav",
        "sample_rate": rate,
        "channels": int(channels),
        "samples": int(n),
        "duration_s": n / rate,
    }
    return P.BLOB_WAV, buf.getvalue(), meta


_ENCODERS = {
    "array": _encode_array,
    "batch": _encode_batch,
    "figure": _encode_figure,
    "pil": _encode_pil,
    "encoded": _encode_encoded,
    "histogram": _encode_histogram,
    "audio": _encode_audio,
}
