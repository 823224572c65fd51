"""Media logging: images, image grids, histograms, audio and matplotlib figures.

The caller's thread validates cheaply, copies what it must (the caller may reuse its
buffer right after the call; ``_media_input``) and queues ``(step, tag id, ms, job)``
in the run's media buffer (:class:`MediaLog`). The writer thread hands the buffer to
:class:`MediaSink`, which encodes each job (``_media_encode``), appends the blob to
``media.r<rank>.pack`` (``_pack``) and returns the references the writer stores in the
event log. The blob is on disk before its reference: a ``kill -9`` can tear a blob,
never make a reference point at one.

Media reaches the run it logs into only through :class:`MediaHost`, the small interface
this module owns (the step to log at, a media tag's id, the media buffer, counting and
warning); ``nblog.write._run_media`` gives it on a Run, whose ``add_image``...
methods hand their arguments to the run's :class:`MediaLog`.

numpy, Pillow and matplotlib are imported inside the calls that need them.
"""

from __future__ import annotations

import os

from .._errors import StrictModeError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, Protocol

    import numpy as np

    from ._media_encode import Job

    class MediaHost(Protocol):
        """What media needs of the run it logs into (``nblog.write._run_media`` gives it).

        Everything here is called in the caller's thread, except :meth:`tag`,
        :meth:`count` and :meth:`warn_once`, which the writer thread's
        :class:`MediaSink` calls too.
        """

        @property
        def dir(self) -> str | None:
            """The run folder (the media pack goes there)."""

        @property
        def rank(self) -> int:
            """This process's rank (names the media pack)."""

        @property
        def session(self) -> int:
            """This process's session number (names the session's pack index)."""

        @property
        def queued(self) -> list:
            """The media buffer: ``(step, tag id, ms, job)`` items the writer thread takes."""

        def step(self, step: Any, tag: object) -> int | None:
            """The step to log at: None gives the run's current step (the counter before
            any; never advancing it); a step that is no int, or negative, is checked
            (None: refused, counted and warned as a bad step)."""

        def tag_id(self, tag: object) -> int | None:
            """The media tag id of ``tag`` (a new one interned; None: a bad tag, refused)."""

        def tag(self, tid: int) -> object:
            """The tag of media tag id ``tid`` (for messages; slow)."""

        def queue(self, step: int, tid: int, job: Job) -> None:
            """Append ``(step, tid, ms now, job)`` to :attr:`queued`; the step counts as
            the tag's highest in this session."""

        def count(self, counter: str, n: int = 1) -> None:
            """Add ``n`` to the session's count of dropped items ``counter``."""

        def warn_once(self, key: tuple, message: str) -> None:
            """Log ``message`` as a warning, once per ``key`` in this run."""

        def reject(self, counter: str, tag: object, message: str) -> None:
            """Bad input: counted, warned once per (call site, tag); raises
            ``StrictModeError`` with ``NB_STRICT=1``."""

        def internal(self, err: Exception) -> None:
            """An error of nblog's own: warned once, counted, never raised."""


_MAX_BACKLOG = 512 << 20  # bytes of copied media waiting for the writer thread, at most


def figure_noop(tag: object = None, figure: Any = None, step: object = None, *, close: bool = True) -> None:
    """add_figure where this rank does not log: only close the figure (no memory growth)."""
    if close:
        from . import _media_input

        _media_input.close_figures(figure)


class MediaLog:
    """The media calls of :class:`nblog.Run` (each ``Run.add_<kind>`` hands its arguments here).

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
    session of the rank appends to it. Memory: copies wait for the writer's media
    thread (it looks every ``flush_interval`` seconds, then encodes one item after
    another while any is queued, apart from the points and text, which a media backlog
    never delays); past 512 MiB of waiting copies, new media is dropped with one
    warning and counted as ``media_backlog``. ``flush()`` encodes everything queued;
    ``finish(timeout=...)`` encodes for what is left of its ``timeout`` (60 s; 1 s on
    SIGTERM) and counts media still queued then as ``media_timeout``.
    """

    __slots__ = ("_host",)

    def __init__(self, host: MediaHost) -> None:
        self._host = host

    # -- the calls -----------------------------------------------------------------

    def add_image(self, tag: str, image: Any, step: int | None = None, *, caption: str | None = None,
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

        Size limit: at most ``PIL.Image.MAX_IMAGE_PIXELS`` pixels (width × height;
        89,478,485 by default, read at each call, never importing Pillow for it) —
        Pillow refuses to open larger images, so no reader or ``nb tui`` could show
        them. A larger image is bad media: skipped with one warning naming the tag and
        the call site, counted as ``dropped["bad_media"]``; ``StrictModeError`` with
        ``NB_STRICT=1``. (A JPEG's size is read in the writer thread: a larger one is
        dropped there, counted and warned the same way.)

        Raises:
            StrictModeError: only with ``NB_STRICT=1``, for bad media or a bad step.
        """
        from . import _media_input

        self._log_media(
            tag, step, lambda: _media_input.image_job(image, dataformats, {"caption": _media_input.check_caption(caption)})
        )

    def add_images(self, tag: str, batch: Any, step: int | None = None, *, dataformats: str | None = None,
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

        Size limit: the grid (``min(N, 8) * W`` × ``ceil(N / 8) * H``) has at most
        ``PIL.Image.MAX_IMAGE_PIXELS`` pixels, as in :meth:`add_image`; a larger one is
        skipped with a warning and counted as ``dropped["bad_media"]``
        (``StrictModeError`` with ``NB_STRICT=1``).

        Raises:
            StrictModeError: only with ``NB_STRICT=1``, for bad media or a bad step.
        """
        from . import _media_input

        self._log_media(
            tag, step, lambda: _media_input.batch_job(batch, dataformats, {"caption": _media_input.check_caption(caption)})
        )

    def add_histogram(self, tag: str, values: Any, step: int | None = None, *,
                      bins: int | str | Sequence[float] | np.ndarray = 64) -> None:
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
                its right edge. Where numpy cannot make them — a range wider than the
                largest float64 (values near ±1.8e308), a range of a few units in the
                last place, one huge value — fewer or halved-and-doubled edges are used
                so that every finite value is still binned (``_media_encode.histogram_stats``).

        Raises:
            StrictModeError: only with ``NB_STRICT=1``, for bad media or a bad step.
        """
        from . import _media_input

        self._log_media(tag, step, lambda: _media_input.histogram_job(values, _media_input.check_bins(bins)))

    def add_audio(self, tag: str, samples: Any, step: int | None = None, *, sample_rate: int) -> None:
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
        from . import _media_input

        self._log_media(tag, step, lambda: _media_input.audio_job(samples, sample_rate))

    def add_figure(self, tag: str, figure: Any, step: int | None = None, *, close: bool = True) -> None:
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
        from . import _media_input

        try:
            self._log_media(tag, step, lambda: _media_input.figure_job(figure))
        finally:
            if close:
                _media_input.close_figures(figure)

    # -- helpers ---------------------------------------------------------------------

    def _log_media(self, tag: str, step: int | None, make_job: Callable[[], Job]) -> None:
        """What every media call does: check ``step`` and ``tag``, then queue
        ``make_job()`` (the call's own checks and copy). Bad media is warned once,
        counted and skipped (raised with ``NB_STRICT=1``); nothing else escapes."""
        from . import _media_input

        host = self._host
        try:
            step = host.step(step, tag)
            if step is None:
                return
            tid = host.tag_id(tag)
            if tid is None:
                return
            self._queue(step, tid, make_job())
        except _media_input.BadMedia as bad:
            host.reject("bad_media", tag, str(bad))
        except StrictModeError:
            raise
        except Exception as err:
            host.internal(err)

    def _queue(self, step: int, tid: int, job: Job) -> None:
        host = self._host
        media = host.queued
        n = len(media)  # the bytes queued are summed every 8 items: O(1) per call
        if n >= 4 and not n & 7 and sum(item[3].nbytes for item in list(media)) + job.nbytes > _MAX_BACKLOG:
            host.count("media_backlog")
            host.warn_once(("media_backlog",), "nblog: media is logged faster than it can be "
                           "encoded and written; dropping media until the writer catches up")
            return
        host.queue(step, tid, job)


# -- writer side -----------------------------------------------------------------------


class MediaSink:
    """The writer's media sink for one run: encode, append to the pack, return refs.

    Called in the writer thread with ``(step, tag id, ms, job)`` items; returns
    ``(step, tag id, ms, offset, length, meta)`` references for the blobs written.
    Never raises: an item that cannot be encoded is counted as ``bad_media`` (warned
    once per tag, naming it and the step), one that cannot be written as
    ``write_error`` (warned once).
    """

    def __init__(self, host: MediaHost) -> None:
        from ..format import _pack
        from ..format._filenames import pack_file_name, session_pack_file_name

        self._host = host
        run_dir = host.dir
        assert run_dir is not None  # made only for a run that writes (Run.__init__)
        self._pack = _pack.PackWriter(os.path.join(run_dir, pack_file_name(host.rank)),
                                      os.path.join(run_dir, session_pack_file_name(host.rank, host.session)))

    @property
    def path(self) -> str:
        return self._pack.path

    def __call__(self, items: list) -> list:
        from . import _media_encode, _media_input

        refs: list = []
        batch = None
        try:
            for step, tid, ms, job in items:
                try:
                    kind, payload, meta = _media_encode.encode(job)
                except Exception as err:
                    tag = self._host.tag(tid)
                    self._drop("bad_media", 1, f"nblog: cannot encode the {job.kind} media of tag {tag!r:.200} "
                               f"(step {step}): {err!r}; skipped", tag)
                    continue
                if job.pooled:  # encoded: the copy may serve the caller's next call
                    _media_input.pool.give(job.data)
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

    def _drop(self, counter: str, n: int, message: str, tag: object = None) -> None:
        """Count ``n`` dropped items; warn once per counter (and tag, when given)."""
        host = self._host
        host.count(counter, n)
        host.warn_once(("media", counter) if tag is None else ("media", counter, repr(tag)[:200]), message)
