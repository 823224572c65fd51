"""Media from the caller's thread: cheap checks, and private copies of the data.

Each ``*_job`` function checks one kind of media input (shape, dtype, emptiness,
finiteness where it matters) and returns an ``_media_encode.Job`` holding a copy the
caller can no longer change: numpy arrays are copied (into a reused buffer when one of
the same shape is free), tensors are copied to the CPU, PIL images with ``.copy()``,
figures are drawn to RGBA pixels (matplotlib is not thread-safe). Bad input raises
:class:`BadMedia`, which the logging call turns into a warning (or an error with
``NB_STRICT=1``). numpy, torch and matplotlib are imported only here, when used.
"""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, Any

from . import _media_encode as E

if TYPE_CHECKING:
    import numpy as np

_MAX_CAPTION = 1 << 16
_CHANNELS = (1, 3, 4)
_BIN_RULES = frozenset({"auto", "fd", "doane", "scott", "stone", "rice", "sturges", "sqrt"})
_MAX_BINS = 1 << 20
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PIL_MAX_PIXELS = 89_478_485  # PIL.Image.MAX_IMAGE_PIXELS's default (1024**3 // 4 // 3)
_JPEG_SIGNATURE = b"\xff\xd8\xff"


class BadMedia(Exception):
    """Bad media from the caller: rejected (warned, counted; raised when strict)."""


def close_figures(figure: Any) -> None:
    plt = sys.modules.get("matplotlib.pyplot")  # figures made without pyplot need no close
    if plt is None or figure is None:
        return
    for fig in figure if isinstance(figure, (list, tuple)) else (figure,):
        try:
            plt.close(fig)
        except Exception:  # not a figure pyplot knows: nothing to release
            pass


def check_caption(caption: object) -> str | None:
    if caption is None:
        return None
    if not isinstance(caption, str):
        raise BadMedia(f"caption must be a str, got {type(caption).__name__}")
    if len(caption) > _MAX_CAPTION:
        raise BadMedia(f"caption longer than {_MAX_CAPTION} characters")
    return str(caption)


def max_pixels() -> int | None:
    """The most pixels an image may have: ``PIL.Image.MAX_IMAGE_PIXELS`` as it is now
    (Pillow refuses to open larger images, so no reader could show them), or its
    default when Pillow is not imported yet (it is not imported for this). None: no
    limit (the user set it to None)."""
    image = sys.modules.get("PIL.Image")
    limit = getattr(image, "MAX_IMAGE_PIXELS", _PIL_MAX_PIXELS) if image is not None else _PIL_MAX_PIXELS
    return None if limit is None else int(limit)


def check_pixels_count(width: int, height: int, what: str = "image") -> None:
    """Raise :class:`BadMedia` when a ``width`` × ``height`` image is larger than
    Pillow opens (:func:`max_pixels`)."""
    limit = max_pixels()
    if limit is not None and width * height > limit:
        raise BadMedia(f"{what} of {width}x{height} = {width * height} pixels is larger than Pillow opens "
                       f"(PIL.Image.MAX_IMAGE_PIXELS = {limit}): no reader could show it")


def _grid_size(n: int, height: int, width: int) -> tuple[int, int]:
    """(width, height) of the grid of ``n`` images of ``height`` × ``width``."""
    cols = min(n, E.GRID_COLUMNS)
    return cols * width, -(-n // cols) * height


def _torch_tensor(x: object) -> bool:
    tensor = getattr(sys.modules.get("torch"), "Tensor", None)  # torch is never imported here
    return tensor is not None and isinstance(x, tensor)


class _BufferPool:
    """Arrays the writer thread has encoded, reused for the next copy of the same shape
    and dtype: a fresh buffer costs a page fault per 4 KiB on first touch, which for a
    million floats is several times the copy itself. Holds at most ``limit`` bytes;
    when full it starts again empty (shapes in use come back at once)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._free: dict = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def take(self, shape: tuple, dtype: np.dtype) -> np.ndarray | None:
        with self._lock:
            stack = self._free.get((shape, dtype))
            if not stack:
                return None
            buf = stack.pop()
            self._bytes -= buf.nbytes
            return buf

    def give(self, buf: np.ndarray) -> None:
        if buf.nbytes > self._limit // 4:
            return
        with self._lock:
            if self._bytes + buf.nbytes > self._limit:
                self._free.clear()
                self._bytes = 0
            self._free.setdefault((buf.shape, buf.dtype), []).append(buf)
            self._bytes += buf.nbytes


pool = _BufferPool(64 << 20)
_torch_dtypes: dict = {}  # torch dtype → numpy dtype of the copy (half floats widen to float32)


def _copy(a: np.ndarray) -> np.ndarray:
    """A private C-ordered copy of numpy array ``a``, in a reused buffer when one is free."""
    import numpy as np

    buf = pool.take(a.shape, a.dtype)
    if buf is None:
        return np.array(a, order="C", copy=True)
    np.copyto(buf, a)
    return buf


def _tensor_copy(t: Any, what: str) -> np.ndarray:
    """A private numpy copy of a torch tensor (from any device: waits for it)."""
    import numpy as np
    import torch

    if not _torch_dtypes:
        for src, dst in ((torch.float32, "f4"), (torch.float64, "f8"), (torch.float16, "f4"),
                         (torch.bfloat16, "f4"), (torch.uint8, "u1"), (torch.int8, "i1"),
                         (torch.int16, "i2"), (torch.int32, "i4"), (torch.int64, "i8"),
                         (torch.bool, "?")):
            _torch_dtypes[src] = np.dtype(dst)
    dtype = _torch_dtypes.get(t.dtype)
    if dtype is None:
        raise BadMedia(f"{what} tensor of dtype {t.dtype} is not supported")
    shape = tuple(t.shape)
    buf = pool.take(shape, dtype)
    if buf is None:
        buf = np.empty(shape, dtype)
    try:
        torch.from_numpy(buf).copy_(t.detach())
    except Exception as err:
        raise BadMedia(f"cannot copy the {what} tensor to the CPU: {err}") from None
    return buf


def _array(x: Any, what: str) -> tuple[np.ndarray, bool, bool]:
    """(numpy array, owned, from a tensor). ``owned``: a private copy already; else the
    caller's own array, to check before copying it with :func:`_copy`."""
    import numpy as np

    if isinstance(x, np.ndarray):
        return x, False, False
    if _torch_tensor(x):
        return _tensor_copy(x, what), True, True
    try:
        a = np.asarray(x)
    except Exception as err:
        raise BadMedia(f"{what} of type {type(x).__name__} is not an array: {err}") from None
    return a, False, False


def _check_pixels(a: np.ndarray, what: str) -> None:
    kind = a.dtype.kind
    if kind not in "fb" and a.dtype.char != "B":
        raise BadMedia(f"{what} dtype {a.dtype} is not supported: use uint8 (0-255), float (0-1) or bool")
    if a.size == 0:
        raise BadMedia(f"{what} of shape {tuple(a.shape)} is empty")
    if kind == "f":
        import numpy as np

        if not np.isfinite(a).all():
            raise BadMedia(f"{what} has NaN or infinite pixels")


def _axes(shape: tuple, dataformats: object, prefer_channels_first: bool, batch: bool) -> tuple[int, ...]:
    """The permutation taking an array of ``shape`` to [N]HW[C]."""
    lead = "N" if batch else ""
    nd = len(shape) - len(lead)
    if dataformats is None:
        if nd == 2:
            fmt = lead + "HW"
        elif nd == 3:
            first, last = shape[len(lead)] in _CHANNELS, shape[-1] in _CHANNELS
            if first and (prefer_channels_first or not last):
                fmt = lead + "CHW"
            elif last:
                fmt = lead + "HWC"
            else:
                raise BadMedia(f"cannot tell the channels of shape {tuple(shape)}: expected 1, 3 or 4 "
                           f"channels first or last; pass dataformats")
        else:
            raise BadMedia(f"image of shape {tuple(shape)} is not {lead}HW, {lead}HWC or {lead}CHW")
    else:
        if not isinstance(dataformats, str):
            raise BadMedia(f"dataformats must be a str, got {type(dataformats).__name__}")
        fmt = dataformats.upper()
        letters = set(lead + "HW") if len(fmt) == len(lead) + 2 else set(lead + "CHW")
        if set(fmt) != letters or len(fmt) != len(letters):
            raise BadMedia(f"dataformats {dataformats!r} is not an order of {''.join(sorted(letters))}")
        if len(fmt) != len(shape):
            raise BadMedia(f"dataformats {dataformats!r} does not fit an array of shape {tuple(shape)}")
    target = lead + ("HWC" if "C" in fmt else "HW")
    perm = tuple(fmt.index(c) for c in target)
    if "C" in fmt and shape[fmt.index("C")] not in _CHANNELS:
        raise BadMedia(f"image of shape {tuple(shape)} has {shape[fmt.index('C')]} channels "
                   f"({fmt}); expected 1, 3 or 4")
    return perm


def image_job(image: Any, dataformats: object, opts: dict) -> E.Job:
    if isinstance(image, (bytes, bytearray, memoryview)):
        return _encoded_job(bytes(image), opts)
    pil_image = getattr(sys.modules.get("PIL.Image"), "Image", None)  # None while being imported
    if pil_image is not None and isinstance(image, pil_image):
        if image.size[0] == 0 or image.size[1] == 0:
            raise BadMedia(f"image of size {image.size} is empty")
        check_pixels_count(image.size[0], image.size[1])
        copy = image.copy()
        return E.Job("pil", copy, opts, image.size[0] * image.size[1] * len(image.getbands()))
    a, owned, tensor = _array(image, "image")
    if a.ndim not in (2, 3):
        raise BadMedia(f"image of shape {tuple(a.shape)} is not HW, HWC or CHW")
    perm = _axes(a.shape, dataformats, tensor, batch=False)
    check_pixels_count(a.shape[perm[1]], a.shape[perm[0]])
    _check_pixels(a, "image")
    if not owned:
        a = _copy(a)
    return E.Job("array", a, dict(opts, perm=perm), a.nbytes, pooled=True)


def _encoded_job(data: bytes, opts: dict) -> E.Job:
    if data.startswith(_PNG_SIGNATURE):
        size = E.png_size(data)
        if size is None:
            raise BadMedia("PNG bytes without a valid IHDR header")
        width, height, channels = size
        check_pixels_count(width, height, "PNG image")
        return E.Job("encoded", data, dict(opts, format="png", width=width, height=height,
                                           channels=channels), len(data))
    if data.startswith(_JPEG_SIGNATURE):
        return E.Job("encoded", data, dict(opts, format="jpeg"), len(data))
    raise BadMedia("image bytes are neither PNG nor JPEG (pass an array or a PIL image)")


def batch_job(batch: Any, dataformats: object, opts: dict) -> E.Job:
    import numpy as np

    if isinstance(batch, (list, tuple)):
        if not batch:
            raise BadMedia("the batch is an empty list")
        arrays = []
        for item in batch:
            a, _owned, tensor = _array(item, "image")
            if a.ndim not in (2, 3):
                raise BadMedia(f"image of shape {tuple(a.shape)} is not HW, HWC or CHW")
            perm = _axes(a.shape, None, tensor, batch=False)
            arrays.append(np.transpose(a, perm))
        if len({x.shape for x in arrays}) > 1 or len({x.dtype for x in arrays}) > 1:
            raise BadMedia("the images of a batch differ in shape or dtype")
        a = np.stack(arrays)  # a copy
        owned, perm, dataformats = True, tuple(range(a.ndim)), None
    else:
        a, owned, tensor = _array(batch, "batch")
        if a.ndim not in (3, 4):
            raise BadMedia(f"batch of shape {tuple(a.shape)} is not NHW, NHWC or NCHW")
        perm = _axes(a.shape, dataformats, tensor, batch=True)
    check_pixels_count(*_grid_size(a.shape[perm[0]], a.shape[perm[1]], a.shape[perm[2]]), "image grid")
    _check_pixels(a, "batch")
    if not owned:
        a = _copy(a)
    return E.Job("batch", a, dict(opts, perm=perm), a.nbytes, pooled=True)


def check_bins(bins: object) -> int | str | np.ndarray:
    if isinstance(bins, bool):
        raise BadMedia("bins must be an int, a sequence of edges or a numpy rule name, got bool")
    if isinstance(bins, int):
        if not 1 <= bins <= _MAX_BINS:
            raise BadMedia(f"bins must be in [1, {_MAX_BINS}], got {bins}")
        return bins
    if isinstance(bins, str):
        if bins not in _BIN_RULES:
            raise BadMedia(f"bins {bins!r} is not one of {sorted(_BIN_RULES)}")
        return bins
    import numpy as np

    try:
        edges = np.array(bins, dtype=np.float64)
    except Exception as err:
        raise BadMedia(f"bins is not an int, a numpy rule name or a sequence of edges: {err}") from None
    if edges.ndim != 1 or len(edges) < 2 or len(edges) > _MAX_BINS + 1:
        raise BadMedia(f"bin edges must be a 1-d sequence of 2 to {_MAX_BINS + 1} numbers")
    if not np.isfinite(edges).all() or not (np.diff(edges) > 0).all():
        raise BadMedia("bin edges must be finite and strictly increasing")
    return edges


def histogram_job(values: Any, bins: int | str | np.ndarray) -> E.Job:
    import numpy as np

    if isinstance(values, np.ndarray):
        a, owned = values, False
    elif _torch_tensor(values):
        if values.is_complex():
            raise BadMedia(f"histogram values of dtype {values.dtype} are not real numbers")
        a, owned = _tensor_copy(values, "histogram"), True
    else:
        try:
            a, owned = np.array(values), True  # a list is copied here
        except Exception as err:
            raise BadMedia(f"histogram values of type {type(values).__name__} are not an array: {err}") from None
    if a.dtype.kind not in "biuf":
        raise BadMedia(f"histogram values of dtype {a.dtype} are not real numbers")
    if a.size == 0:
        raise BadMedia("histogram values are empty")
    if not owned:
        a = _copy(a)
    return E.Job("histogram", a, {"bins": bins}, a.nbytes, pooled=True)


def audio_job(samples: Any, sample_rate: Any) -> E.Job:
    if sample_rate.__class__ is not int:
        if isinstance(sample_rate, bool) or not hasattr(sample_rate, "__index__"):
            raise BadMedia(f"sample_rate must be a positive int, got {sample_rate!r}")
        sample_rate = int(sample_rate.__index__())
    if not 1 <= sample_rate <= 0xFFFFFFFF:
        raise BadMedia(f"sample_rate must be a positive int (Hz), got {sample_rate}")
    a, owned, _tensor = _array(samples, "audio")
    if a.ndim not in (1, 2):
        raise BadMedia(f"audio of shape {tuple(a.shape)} is not (L,) or (C, L)")
    if a.ndim == 2 and not 1 <= a.shape[0] <= 64:
        raise BadMedia(f"audio of shape {tuple(a.shape)} has {a.shape[0]} channels: expected (C, L) "
                   "with at most 64 channels (transpose an (L, C) array)")
    if a.dtype.kind != "f" and a.dtype.name != "int16":
        raise BadMedia(f"audio dtype {a.dtype} is not supported: use float (-1 to 1) or int16")
    if a.size == 0:
        raise BadMedia(f"audio of shape {tuple(a.shape)} is empty")
    if a.dtype.kind == "f":
        import numpy as np

        if not np.isfinite(a).all():
            raise BadMedia("audio has NaN or infinite samples")
    if not owned:
        a = _copy(a)
    return E.Job("audio", a, {"sample_rate": sample_rate}, a.nbytes, pooled=True)


def _render(figure: Any) -> np.ndarray:
    """A figure → H×W×4 uint8 RGBA pixels, drawn by Agg (in the caller's thread)."""
    import numpy as np

    if not hasattr(figure, "savefig") or not hasattr(figure, "canvas"):
        raise BadMedia(f"figure must be a matplotlib Figure, got {type(figure).__name__}")
    canvas = figure.canvas
    if not hasattr(canvas, "buffer_rgba"):
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        canvas = FigureCanvasAgg(figure)
    canvas.draw()
    return np.array(canvas.buffer_rgba(), dtype=np.uint8, copy=True)


def figure_job(figure: Any) -> E.Job:
    import numpy as np

    if isinstance(figure, (list, tuple)):
        if not figure:
            raise BadMedia("the list of figures is empty")
        frames = [_render(f) for f in figure]
        if len({f.shape for f in frames}) > 1:
            raise BadMedia("the figures of a list differ in size")
        check_pixels_count(*_grid_size(len(frames), frames[0].shape[0], frames[0].shape[1]), "figure grid")
        rgba = np.stack(frames)
        return E.Job("figure", rgba, {"batch": True}, rgba.nbytes)
    rgba = _render(figure)
    if rgba.size == 0:
        raise BadMedia("the figure has no pixels")
    check_pixels_count(rgba.shape[1], rgba.shape[0], "figure")
    return E.Job("figure", rgba, {}, rgba.nbytes)
