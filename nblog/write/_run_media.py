"""Run's media calls, handed to ``nblog.media`` through the interface media owns.

``nblog.media`` checks, copies and queues media in the caller's thread
(``media/_media.py``: ``MediaLog``) and encodes it in the writer thread (``MediaSink``).
It reaches the run only through ``MediaHost``, the small interface it declares: the
step to log at, a media tag's id, the media buffer and its tags' highest steps,
counting and warning. :class:`RunMediaHost` gives that interface on a Run (this
package's own privates stay here); :class:`MediaCalls` gives Run its ``add_image``,
``add_images``, ``add_histogram``, ``add_audio`` and ``add_figure`` methods, each
handing its arguments to the run's ``MediaLog`` (their docstrings are media's). On
ranks that do not log, and after ``finish``, those methods are bound to no-ops once
(:meth:`MediaCalls._bind_media_noops`).
"""

from __future__ import annotations

import time

from ..format import _format as F
from ..media._media import MediaLog, figure_noop

TYPE_CHECKING = False  # typing is not imported: `import nblog` stays light
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

    import numpy as np

    from ..media._media_encode import Job
    from ._run import Run

_mono_ns = time.monotonic_ns


class RunMediaHost:
    """A Run as media's ``MediaHost`` (see ``media/_media.py`` for what each call means)."""

    __slots__ = ("_run", "queued")

    def __init__(self, run: Run) -> None:
        self._run = run
        self.queued = run._media  # the list the writer thread drains (never rebound)

    @property
    def dir(self) -> str | None:
        return self._run.dir

    @property
    def rank(self) -> int:
        return self._run.rank

    @property
    def session(self) -> int:
        return self._run.session

    def step(self, step: Any, tag: object) -> int | None:
        run = self._run
        if step is None:  # the current step; before any, the counter (0 at start)
            return run._step if run._step is not None else run._counter
        if step.__class__ is not int or step < 0:
            return run._check_step(step, tag)
        return step

    def tag_id(self, tag: object) -> int | None:
        run = self._run
        tid = run._media_tids.get(tag) if tag.__class__ is str else None
        if tid is None:
            tid = run._intern(run._media_tids, tag, F.KIND_MEDIA)
        return tid

    def tag(self, tid: int) -> object:
        for tag, t in list(self._run._media_tids.items()):
            if t == tid:
                return tag
        return f"<tag id {tid}>"

    def queue(self, step: int, tid: int, job: Job) -> None:
        run = self._run
        run._media.append((step, tid, (_mono_ns() - run._t0) // 1_000_000 & 0xFFFFFFFF, job))
        hi = run._hi
        if step > hi[tid]:  # the step this rank is in counts its media (Run._current_step)
            hi[tid] = step

    def count(self, counter: str, n: int = 1) -> None:
        self._run._count(counter, n)

    def warn_once(self, key: tuple, message: str) -> None:
        self._run._warn_once(key, message)

    def reject(self, counter: str, tag: object, message: str) -> None:
        self._run._reject(counter, tag, message)

    def internal(self, err: Exception) -> None:
        self._run._internal(err)


class MediaCalls:
    """Run's media methods: each hands its arguments to the run's ``MediaLog``."""

    _media_log: MediaLog  # set by Run.__init__

    def _bind_media_noops(self, noop: Callable[..., None]) -> None:
        """Bind every media call to ``noop`` (ranks that do not log; after finish);
        ``add_figure`` still closes its figure."""
        self.add_image = noop
        self.add_images = noop
        self.add_histogram = noop
        self.add_audio = noop
        self.add_figure = figure_noop

    def add_image(self, tag: str, image: Any, step: int | None = None, *, caption: str | None = None,
                  dataformats: str | None = None) -> None:
        self._media_log.add_image(tag, image, step, caption=caption, dataformats=dataformats)

    def add_images(self, tag: str, batch: Any, step: int | None = None, *, dataformats: str | None = None,
                   caption: str | None = None) -> None:
        self._media_log.add_images(tag, batch, step, dataformats=dataformats, caption=caption)

    def add_histogram(self, tag: str, values: Any, step: int | None = None, *,
                      bins: int | str | Sequence[float] | np.ndarray = 64) -> None:
        self._media_log.add_histogram(tag, values, step, bins=bins)

    def add_audio(self, tag: str, samples: Any, step: int | None = None, *, sample_rate: int) -> None:
        self._media_log.add_audio(tag, samples, step, sample_rate=sample_rate)

    def add_figure(self, tag: str, figure: Any, step: int | None = None, *, close: bool = True) -> None:
        self._media_log.add_figure(tag, figure, step, close=close)

    add_image.__doc__ = MediaLog.add_image.__doc__
    add_images.__doc__ = MediaLog.add_images.__doc__
    add_histogram.__doc__ = MediaLog.add_histogram.__doc__
    add_audio.__doc__ = MediaLog.add_audio.__doc__
    add_figure.__doc__ = MediaLog.add_figure.__doc__
