"""Media logging: images, image grids, histograms, audio and matplotlib figures.

The caller's thread validates cheaply, copies what it must (the caller may reuse its
buffer right after the call) and appends ``(step, tag id, ms, job)`` to the run's media
buffer. The writer thread hands the buffer to :class:`MediaSink`, which encodes each
job (``_media_encode``), appends the blob to ``media.r<rank>.pack`` (``_pack``) and
returns the references the writer stores in the event log. The blob is on disk before
its reference: a ``kill -9`` can tear a blob, never make a reference point at one.

numpy, Pillow and matplotlib are imported inside the calls that need them.
"""

from __future__ import annotations

import os
import sys
import time

from . import _format as F
from . import _media_encode as E
from . import _pack as P
from ._errors import StrictModeError

_mono_ns = time.monotonic_ns
_MAX_BACKLOG = 512 << 20  # bytes of copied media waiting for the writer thread, at most
_MAX_CAPTION = 1 << 16
_CHANNELS = (1, 3, 4)
_BIN_RULES = frozenset({"auto", "fd", "doane", "scott", "stone", "rice", "sturges", "sqrt"})
_MAX_BINS = 1 << 20
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_JPEG_SIGNATURE = b"\xff\xd8\xff"


class _Bad(Exception):
    """Bad media from the caller: rejected (warned, counted; raised when strict)."""


def _figure_noop(tag=None, figure=None, step=None, *, close: bool = True) -> None:
    """add_figure where this rank does not log: only close the figure (no memory growth)."""
    if close:
        _close_figures(figure)


def _close_figures(figure) -> None:
    plt = sys.modules.get("matplotlib.pyplot")  # figures made without pyplot need no close
    if plt is None or figure is None:
        return
    for fig in figure if isinstance(figure, (list, tuple)) else (figure,):
        try:
            plt.close(fig)
        except Exception:  # not a figure pyplot knows: nothing to release
            pass


class MediaMixin:
    """The media calls of :class:`nblog.Run`.

    All of them log at ``step`` (a non-negative int; None uses the run's current step,
    the last one given to or counted by ``add_scalar``, without advancing it) under
    ``tag`` (same rules as a scalar tag; ``/`` groups tags in viewers). The caller's
    thread only checks and copies the data; encoding and disk I/O happen in the
    writer thread. Only rank 0 logs media: on other ranks these calls return at once
    (``add_figure`` still closes the figure). Bad media (an impossible shape, a wrong
    dtype, an empty array, a non-finite image) is skipped with one warning per
    (call site, tag) and counted in the session; with ``NB_STRICT=1`` it raises
    ``StrictModeError``. Thread-safe.

    Files: the first media record creates ``media.r0.pack`` in the run folder; every
    session of the rank appends to it. Memory: copies wait for the writer thread (it
    wakes every ``flush_interval`` seconds); past 512 MiB of waiting copies, new media
    is dropped with one warning and counted as ``media_backlog``.
    """

    # Provided by Run.
    _step: int
    _t0: int
    _media: list
    _media_tids: dict
    _strict: bool

    def _bind_media_noops(self, noop) -> None:
        """Bind every media call to ``noop`` (ranks that do not log; after finish)."""
        self.add_image = noop
        self.add_images = noop
        self.add_histogram = noop
        self.add_audio = noop
        self.add_figure = _figure_noop

    # -- the calls -----------------------------------------------------------------

    def add_image(self, tag: str, image, step: int | None = None, *, caption: str | None = None,
                  dataformats: str | None = None) -> None:
        """Log one image, stored as PNG in the media pack.

        Mirrors ``SummaryWriter.add_image`` of torch.utils.tensorboard, except that the
        layout is inferred when ``dataformats`` is None (TensorBoard assumes CHW) and
        float pixels are rounded rather than truncated.

        Args:
            tag: the image's tag.
            image: one of
                - a numpy array or torch tensor (any device; copied to the CPU here) of
                  shape HW (grayscale), HWC or CHW with 1, 3 or 4 channels (L, RGB,
                  RGBA); dtype uint8 (0–255), float (0–1: scaled by 255, rounded,
                  clipped to 0–255; NaN or ±inf rejects the image) or bool (0/255).
                  A 3-d shape whose first or last axis alone is 1, 3 or 4 says where the
                  channels are; when both are, a tensor is read as CHW and a numpy
                  array as HWC — pass ``dataformats`` to say otherwise;
                - a ``PIL.Image.Image`` (copied; stored as PNG in its own mode, modes
                  PNG cannot hold converted to RGB/RGBA);
                - encoded PNG or JPEG ``bytes`` (stored untouched, as they are).
            step: the step; None: the current step.
            caption: a text stored with the image (at most 65536 characters).
            dataformats: the axes of an array, as TensorBoard names them: "HW", "HWC",
                "CHW" or another order of those letters.
        """
        try:
            step = self._media_step(step, tag)
            if step is None:
                return
            tid = self._media_tid(tag)
            if tid is None:
                return
            opts = {"caption": _check_caption(caption)}
            self._queue(step, tid, _image_job(image, dataformats, opts))
        except _Bad as bad:
            self._reject("bad_media", tag, str(bad))
        except StrictModeError:
            raise
        except Exception as err:
            self._internal(err)

    def add_images(self, tag: str, batch, step: int | None = None, *, dataformats: str | None = None,
                   caption: str | None = None) -> None:
        """Log a batch of images as one grid image (PNG): ``min(N, 8)`` columns, row by
        row, no padding, black where the last row is short — as
        ``SummaryWriter.add_images`` of torch.utils.tensorboard.

        Args:
            tag: the grid's tag.
            batch: a numpy array or torch tensor of shape NCHW, NHWC or NHW (dtypes as
                :meth:`add_image`; a 4-d shape is read like a 3-d one in add_image,
                with NCHW for a tensor and NHWC for a numpy array when ambiguous), or a
                list of same-shaped images (each as :meth:`add_image` accepts arrays).
            step: the step; None: the current step.
            dataformats: "NCHW", "NHWC", "NHW" or another order of those letters.
            caption: a text stored with the grid.
        """
        try:
            step = self._media_step(step, tag)
            if step is None:
                return
            tid = self._media_tid(tag)
            if tid is None:
                return
            opts = {"caption": _check_caption(caption)}
            self._queue(step, tid, _batch_job(batch, dataformats, opts))
        except _Bad as bad:
            self._reject("bad_media", tag, str(bad))
        except StrictModeError:
            raise
        except Exception as err:
            self._internal(err)

    def add_histogram(self, tag: str, values, step: int | None = None, *, bins=64) -> None:
        """Log the distribution of ``values``: bin edges and counts, plus count, min,
        max, sum and sum of squares of the finite values (float64), computed in bulk in
        the writer thread; NaN, +inf and -inf are counted apart, never binned.

        The caller's thread only copies the values (a tensor on a GPU is copied to the
        CPU: that waits for the GPU, as any ``.cpu()`` does). Mirrors
        ``SummaryWriter.add_histogram``, whose default bins ("tensorflow") are not
        offered.

        Args:
            tag: the histogram's tag.
            values: a numpy array, torch tensor, list or other array-like of numbers
                (bool, int, float; any shape, flattened); not empty.
            step: the step; None: the current step.
            bins: the number of equal-width bins between min and max (default 64), a
                strictly increasing sequence of edges (finite values outside them are
                counted in ``num`` but in no bin), or a numpy rule name ("auto", "fd",
                "sturges", ...). Bins follow ``numpy.histogram``: the last one includes
                its right edge.
        """
        try:
            step = self._media_step(step, tag)
            if step is None:
                return
            tid = self._media_tid(tag)
            if tid is None:
                return
            self._queue(step, tid, _histogram_job(values, _check_bins(bins)))
        except _Bad as bad:
            self._reject("bad_media", tag, str(bad))
        except StrictModeError:
            raise
        except Exception as err:
            self._internal(err)

    def add_audio(self, tag: str, samples, step: int | None = None, *, sample_rate: int) -> None:
        """Log a sound clip, stored as a 16-bit PCM WAV file.

        Args:
            tag: the clip's tag.
            samples: a numpy array or torch tensor of shape (L,) (mono) or (C, L)
                (C channels, at most 64, as torchaudio and TensorBoard's (1, L));
                float in [-1, 1] (clipped, scaled by 32767, rounded; NaN or ±inf rejects
                the clip) or int16 (stored as is).
            step: the step; None: the current step.
            sample_rate: samples per second and channel (Hz), a positive int.
        """
        try:
            step = self._media_step(step, tag)
            if step is None:
                return
            tid = self._media_tid(tag)
            if tid is None:
                return
            self._queue(step, tid, _audio_job(samples, sample_rate))
        except _Bad as bad:
            self._reject("bad_media", tag, str(bad))
        except StrictModeError:
            raise
        except Exception as err:
            self._internal(err)

    def add_figure(self, tag: str, figure, step: int | None = None, *, close: bool = True) -> None:
        """Log a matplotlib figure as a PNG image (as ``SummaryWriter.add_figure``).

        The figure is drawn here, in the caller's thread (matplotlib is not
        thread-safe), into RGBA pixels by the Agg renderer at the figure's dpi; PNG
        compression happens in the writer thread. With ``close`` the figure is then
        closed with ``pyplot.close`` (when pyplot is in use), so memory does not grow —
        on every rank, including those that do not log.

        Args:
            tag: the image's tag.
            figure: a ``matplotlib.figure.Figure``, or a list of same-sized figures
                (logged as one grid, as :meth:`add_images`).
            step: the step; None: the current step.
            close: close the figure(s) after drawing.
        """
        try:
            step = self._media_step(step, tag)
            if step is None:
                return
            tid = self._media_tid(tag)
            if tid is None:
                return
            self._queue(step, tid, _figure_job(figure))
        except _Bad as bad:
            self._reject("bad_media", tag, str(bad))
        except StrictModeError:
            raise
        except Exception as err:
            self._internal(err)
        finally:
            if close:
                _close_figures(figure)

    # -- helpers ---------------------------------------------------------------------

    def _media_step(self, step, tag) -> int | None:
        if step is None:
            return self._step
        if step.__class__ is not int or step < 0:
            return self._check_step(step, tag)
        return step

    def _media_tid(self, tag) -> int | None:
        tid = self._media_tids.get(tag) if tag.__class__ is str else None
        if tid is None:
            tid = self._intern(self._media_tids, tag, F.KIND_MEDIA)
        return tid

    def _queue(self, step: int, tid: int, job: E.Job) -> None:
        media = self._media
        n = len(media)  # the bytes queued are summed every 8 items: O(1) per call
        if n >= 4 and not n & 7 and sum(item[3].nbytes for item in list(media)) + job.nbytes > _MAX_BACKLOG:
            writer = self._writer
            if writer is not None:
                writer.dropped["media_backlog"] += 1
            else:
                held = self._dropped_before_writer
                held["media_backlog"] = held.get("media_backlog", 0) + 1
            self._warn_once(("media_backlog",), "nblog: media is logged faster than it can be "
                            "encoded and written; dropping media until the writer catches up")
            return
        media.append((step, tid, (_mono_ns() - self._t0) // 1_000_000 & 0xFFFFFFFF, job))


# -- caller-side checks and copies ------------------------------------------------------


def _check_caption(caption) -> str | None:
    if caption is None:
        return None
    if not isinstance(caption, str):
        raise _Bad(f"caption must be a str, got {type(caption).__name__}")
    if len(caption) > _MAX_CAPTION:
        raise _Bad(f"caption longer than {_MAX_CAPTION} characters")
    return str(caption)


def _torch_tensor(x) -> bool:
    tensor = getattr(sys.modules.get("torch"), "Tensor", None)  # torch is never imported here
    return tensor is not None and isinstance(x, tensor)


class _BufferPool:
    """Arrays the writer thread has encoded, reused for the next copy of the same shape
    and dtype: a fresh buffer costs a page fault per 4 KiB on first touch, which for a
    million floats is several times the copy itself. Holds at most ``limit`` bytes;
    when full it starts again empty (shapes in use come back at once)."""

    def __init__(self, limit: int):
        import threading

        self._limit = limit
        self._free: dict = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def take(self, shape: tuple, dtype):
        with self._lock:
            stack = self._free.get((shape, dtype))
            if not stack:
                return None
            buf = stack.pop()
            self._bytes -= buf.nbytes
            return buf

    def give(self, buf) -> None:
        if buf.nbytes > self._limit // 4:
            return
        with self._lock:
            if self._bytes + buf.nbytes > self._limit:
                self._free.clear()
                self._bytes = 0
            self._free.setdefault((buf.shape, buf.dtype), []).append(buf)
            self._bytes += buf.nbytes


_pool = _BufferPool(64 << 20)
_torch_dtypes: dict = {}  # torch dtype → numpy dtype of the copy (half floats widen to float32)


def _copy(a):
    """A private C-ordered copy of numpy array ``a``, in a reused buffer when one is free."""
    import numpy as np

    buf = _pool.take(a.shape, a.dtype)
    if buf is None:
        return np.array(a, order="C", copy=True)
    np.copyto(buf, a)
    return buf


def _tensor_copy(t, what: str):
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
        raise _Bad(f"{what} tensor of dtype {t.dtype} is not supported")
    shape = tuple(t.shape)
    buf = _pool.take(shape, dtype)
    if buf is None:
        buf = np.empty(shape, dtype)
    try:
        torch.from_numpy(buf).copy_(t.detach())
    except Exception as err:
        raise _Bad(f"cannot copy the {what} tensor to the CPU: {err}") from None
    return buf


def _array(x, what: str):
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
        raise _Bad(f"{what} of type {type(x).__name__} is not an array: {err}") from None
    return a, False, False


def _check_pixels(a, what: str) -> None:
    kind = a.dtype.kind
    if kind not in "fb" and a.dtype.char != "B":
        raise _Bad(f"{what} dtype {a.dtype} is not supported: use uint8 (0-255), float (0-1) or bool")
    if a.size == 0:
        raise _Bad(f"{what} of shape {tuple(a.shape)} is empty")
    if kind == "f":
        import numpy as np

        if not np.isfinite(a).all():
            raise _Bad(f"{what} has NaN or infinite pixels")


def _axes(shape: tuple, dataformats, prefer_channels_first: bool, batch: bool) -> tuple[int, ...]:
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
                raise _Bad(f"cannot tell the channels of shape {tuple(shape)}: expected 1, 3 or 4 "
                           f"channels first or last; pass dataformats")
        else:
            raise _Bad(f"image of shape {tuple(shape)} is not {lead}HW, {lead}HWC or {lead}CHW")
    else:
        if not isinstance(dataformats, str):
            raise _Bad(f"dataformats must be a str, got {type(dataformats).__name__}")
        fmt = dataformats.upper()
        letters = set(lead + "HW") if len(fmt) == len(lead) + 2 else set(lead + "CHW")
        if set(fmt) != letters or len(fmt) != len(letters):
            raise _Bad(f"dataformats {dataformats!r} is not an order of {''.join(sorted(letters))}")
        if len(fmt) != len(shape):
            raise _Bad(f"dataformats {dataformats!r} does not fit an array of shape {tuple(shape)}")
    target = lead + ("HWC" if "C" in fmt else "HW")
    perm = tuple(fmt.index(c) for c in target)
    if "C" in fmt and shape[fmt.index("C")] not in _CHANNELS:
        raise _Bad(f"image of shape {tuple(shape)} has {shape[fmt.index('C')]} channels "
                   f"({fmt}); expected 1, 3 or 4")
    return perm


def _image_job(image, dataformats, opts: dict) -> E.Job:
    if isinstance(image, (bytes, bytearray, memoryview)):
        return _encoded_job(bytes(image), opts)
    pil_image = getattr(sys.modules.get("PIL.Image"), "Image", None)  # None while being imported
    if pil_image is not None and isinstance(image, pil_image):
        if image.size[0] == 0 or image.size[1] == 0:
            raise _Bad(f"image of size {image.size} is empty")
        copy = image.copy()
        return E.Job("pil", copy, opts, image.size[0] * image.size[1] * len(image.getbands()))
    a, owned, tensor = _array(image, "image")
    if a.ndim not in (2, 3):
        raise _Bad(f"image of shape {tuple(a.shape)} is not HW, HWC or CHW")
    perm = _axes(a.shape, dataformats, tensor, batch=False)
    _check_pixels(a, "image")
    if not owned:
        a = _copy(a)
    return E.Job("array", a, dict(opts, perm=perm), a.nbytes, pooled=True)


def _encoded_job(data: bytes, opts: dict) -> E.Job:
    if data.startswith(_PNG_SIGNATURE):
        size = E.png_size(data)
        if size is None:
            raise _Bad("PNG bytes without a valid IHDR header")
        width, height, channels = size
        return E.Job("encoded", data, dict(opts, format="png", width=width, height=height,
                                           channels=channels), len(data))
    if data.startswith(_JPEG_SIGNATURE):
        return E.Job("encoded", data, dict(opts, format="jpeg"), len(data))
    raise _Bad("image bytes are neither PNG nor JPEG (pass an array or a PIL image)")


def _batch_job(batch, dataformats, opts: dict) -> E.Job:
    import numpy as np

    if isinstance(batch, (list, tuple)):
        if not batch:
            raise _Bad("the batch is an empty list")
        arrays = []
        for item in batch:
            a, _owned, tensor = _array(item, "image")
            if a.ndim not in (2, 3):
                raise _Bad(f"image of shape {tuple(a.shape)} is not HW, HWC or CHW")
            perm = _axes(a.shape, None, tensor, batch=False)
            arrays.append(np.transpose(a, perm))
        if len({x.shape for x in arrays}) > 1 or len({x.dtype for x in arrays}) > 1:
            raise _Bad("the images of a batch differ in shape or dtype")
        a = np.stack(arrays)  # a copy
        owned, perm, dataformats = True, tuple(range(a.ndim)), None
    else:
        a, owned, tensor = _array(batch, "batch")
        if a.ndim not in (3, 4):
            raise _Bad(f"batch of shape {tuple(a.shape)} is not NHW, NHWC or NCHW")
        perm = _axes(a.shape, dataformats, tensor, batch=True)
    _check_pixels(a, "batch")
    if not owned:
        a = _copy(a)
    return E.Job("batch", a, dict(opts, perm=perm), a.nbytes, pooled=True)


def _check_bins(bins):
    if isinstance(bins, bool):
        raise _Bad("bins must be an int, a sequence of edges or a numpy rule name, got bool")
    if isinstance(bins, int):
        if not 1 <= bins <= _MAX_BINS:
            raise _Bad(f"bins must be in [1, {_MAX_BINS}], got {bins}")
        return bins
    if isinstance(bins, str):
        if bins not in _BIN_RULES:
            raise _Bad(f"bins {bins!r} is not one of {sorted(_BIN_RULES)}")
        return bins
    import numpy as np

    try:
        edges = np.array(bins, dtype=np.float64)
    except Exception as err:
        raise _Bad(f"bins is not an int, a numpy rule name or a sequence of edges: {err}") from None
    if edges.ndim != 1 or len(edges) < 2 or len(edges) > _MAX_BINS + 1:
        raise _Bad(f"bin edges must be a 1-d sequence of 2 to {_MAX_BINS + 1} numbers")
    if not np.isfinite(edges).all() or not (np.diff(edges) > 0).all():
        raise _Bad("bin edges must be finite and strictly increasing")
    return edges


def _histogram_job(values, bins) -> E.Job:
    import numpy as np

    if isinstance(values, np.ndarray):
        a, owned = values, False
    elif _torch_tensor(values):
        if values.is_complex():
            raise _Bad(f"histogram values of dtype {values.dtype} are not real numbers")
        a, owned = _tensor_copy(values, "histogram"), True
    else:
        try:
            a, owned = np.array(values), True  # a list is copied here
        except Exception as err:
            raise _Bad(f"histogram values of type {type(values).__name__} are not an array: {err}") from None
    if a.dtype.kind not in "biuf":
        raise _Bad(f"histogram values of dtype {a.dtype} are not real numbers")
    if a.size == 0:
        raise _Bad("histogram values are empty")
    if not owned:
        a = _copy(a)
    return E.Job("histogram", a, {"bins": bins}, a.nbytes, pooled=True)


def _audio_job(samples, sample_rate) -> E.Job:
    if sample_rate.__class__ is not int:
        if isinstance(sample_rate, bool) or not hasattr(sample_rate, "__index__"):
            raise _Bad(f"sample_rate must be a positive int, got {sample_rate!r}")
        sample_rate = int(sample_rate.__index__())
    if not 1 <= sample_rate <= 0xFFFFFFFF:
        raise _Bad(f"sample_rate must be a positive int (Hz), got {sample_rate}")
    a, owned, _tensor = _array(samples, "audio")
    if a.ndim not in (1, 2):
        raise _Bad(f"audio of shape {tuple(a.shape)} is not (L,) or (C, L)")
    if a.ndim == 2 and not 1 <= a.shape[0] <= 64:
        raise _Bad(f"audio of shape {tuple(a.shape)} has {a.shape[0]} channels: expected (C, L) "
                   "with at most 64 channels (transpose an (L, C) array)")
    if a.dtype.kind != "f" and a.dtype.name != "int16":
        raise _Bad(f"audio dtype {a.dtype} is not supported: use float (-1 to 1) or int16")
    if a.size == 0:
        raise _Bad(f"audio of shape {tuple(a.shape)} is empty")
    if a.dtype.kind == "f":
        import numpy as np

        if not np.isfinite(a).all():
            raise _Bad("audio has NaN or infinite samples")
    if not owned:
        a = _copy(a)
    return E.Job("audio", a, {"sample_rate": sample_rate}, a.nbytes, pooled=True)


def _render(figure):
    """A figure → H×W×4 uint8 RGBA pixels, drawn by Agg (in the caller's thread)."""
    import numpy as np

    if not hasattr(figure, "savefig") or not hasattr(figure, "canvas"):
        raise _Bad(f"figure must be a matplotlib Figure, got {type(figure).__name__}")
    canvas = figure.canvas
    if not hasattr(canvas, "buffer_rgba"):
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        canvas = FigureCanvasAgg(figure)
    canvas.draw()
    return np.array(canvas.buffer_rgba(), dtype=np.uint8, copy=True)


def _figure_job(figure) -> E.Job:
    import numpy as np

    if isinstance(figure, (list, tuple)):
        if not figure:
            raise _Bad("the list of figures is empty")
        frames = [_render(f) for f in figure]
        if len({f.shape for f in frames}) > 1:
            raise _Bad("the figures of a list differ in size")
        rgba = np.stack(frames)
        return E.Job("figure", rgba, {"batch": True}, rgba.nbytes)
    rgba = _render(figure)
    if rgba.size == 0:
        raise _Bad("the figure has no pixels")
    return E.Job("figure", rgba, {}, rgba.nbytes)


# -- writer side -----------------------------------------------------------------------


class MediaSink:
    """The writer's media sink for one run: encode, append to the pack, return refs.

    Called in the writer thread with ``(step, tag id, ms, job)`` items; returns
    ``(step, tag id, ms, offset, length, meta)`` references for the blobs written.
    Never raises: an item that cannot be encoded is counted as ``bad_media``, one
    that cannot be written as ``write_error`` (each warned once).
    """

    def __init__(self, run):
        self._run = run
        self._pack = P.PackWriter(os.path.join(run.dir, P.pack_file_name(run.rank)))

    @property
    def path(self) -> str:
        return self._pack.path

    def __call__(self, items: list) -> list:
        refs: list = []
        batch = None
        try:
            for step, tid, ms, job in items:
                try:
                    kind, payload, meta = E.encode(job)
                except Exception as err:
                    self._drop("bad_media", 1, f"nblog: cannot encode {job.kind} media: {err!r}; skipped")
                    continue
                if job.pooled:  # encoded: the copy may serve the caller's next call
                    _pool.give(job.data)
                    job.data = None
                try:
                    if batch is None:
                        batch = self._pack.open()
                    offset = batch.append(kind, payload)
                except OSError as err:
                    self._drop("write_error", 1, f"nblog: cannot write media to {self.path}: "
                               f"{getattr(err, 'strerror', None) or err}; training goes on, dropped media is counted")
                    continue
                refs.append((step, tid, ms, offset, len(payload), meta))
        except Exception as err:  # never into the writer, never into training
            self._drop("internal", len(items) - len(refs), f"nblog: internal media error: {err!r}")
        finally:
            if batch is not None:
                batch.close()
        return refs

    def _drop(self, counter: str, n: int, message: str) -> None:
        run = self._run
        writer = run._writer
        if writer is not None:
            writer.dropped[counter] += n
        run._warn_once(("media", counter), message)
