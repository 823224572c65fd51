"""Timers: :meth:`nblog.Run.timer`'s context manager and decorator.

``__enter__`` reads ``time.perf_counter``; ``__exit__`` packs one point (tag = the
timer's name in the timer table, value = seconds) into the run's points buffer at the
timer's step or the run's current step, in the caller's thread. Before this session
knows a step the point waits for it (``Scalars._defer``). Where the rank does not
time, :meth:`nblog.Run.timer` returns :data:`NO_TIMER`, a reusable no-op.
"""

from __future__ import annotations

import time
from functools import wraps

from ..format import _format as F
from ._checks import STEP_END as _STEP_END

TYPE_CHECKING = False  # typing is not imported: `import nblog` stays light
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from ._run import Run

_mono_ns = time.monotonic_ns
_perf = time.perf_counter
_pack = F.POINT.pack


class NoTimer:
    """The timer of a rank that does not time: a reusable no-op context manager."""

    __slots__ = ()

    def __enter__(self) -> NoTimer:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __call__(self, fn: Callable) -> Callable:
        return fn


NO_TIMER = NoTimer()


class Timer:
    """Times a block or a function in seconds (``time.perf_counter``) at a step.

    Made by :meth:`Run.timer`. Each ``with`` block or decorated call logs one point
    (tag = the timer's name, value = seconds) at ``step``, or at the run's current
    step (the last step passed to or counted by ``add_scalar``). Re-entrant use of the
    same object from several threads is not supported; create one per use.
    """

    __slots__ = ("_run", "_tid", "_step", "_t0")

    def __init__(self, run: Run, tid: int, step: int | None):
        self._run = run
        self._tid = tid
        self._step = step
        self._t0 = 0.0

    def __enter__(self) -> Timer:
        self._t0 = _perf()
        return self

    def __exit__(self, *exc: object) -> None:
        seconds = _perf() - self._t0
        run = self._run
        if run._finished:  # a timer made before finish (a decorated function) used after it
            if not run._inert:
                run._after_finish("timer")
            return None
        step = self._step  # checked by Run.timer
        if step is None:
            step = run._step
            if step is None:  # no step yet in this session: the next one known
                run._defer(("point", self._tid, seconds, (_mono_ns() - run._t0) // 1_000_000 & 0xFFFFFFFF))
                return None
            if step.__class__ is not int or not 0 <= step < _STEP_END:
                # a rank that only times remembers add_scalar's step unchecked (its
                # add_scalar stays a few ns); check it here, where it is used
                name = next((n for n, t in run._timer_tids.items() if t == self._tid), None)
                step = run._check_step(step, name)
                if step is None:
                    return None
        try:
            run._points += _pack(
                step, seconds, self._tid, (_mono_ns() - run._t0) // 1_000_000 & 0xFFFFFFFF
            )
            hi = run._hi
            if step > hi[self._tid]:  # the step this rank is in counts its timers (_current_step)
                hi[self._tid] = step
        except Exception as err:  # a step out of range, never an error into training
            run._internal(err)

    def __call__(self, fn: Callable) -> Callable:
        run, tid, step = self._run, self._tid, self._step

        @wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            with Timer(run, tid, step):
                return fn(*args, **kwargs)

        return timed

