"""The one rule that undoes the 32-bit wrap of a record's milliseconds.

Every record stores its time as u32 milliseconds since its session started, so the
value wraps past 2**32 after 49.7 days. A reader places a wrapped value ``ms32`` next
to a reference ``ref`` (a full, unwrapped time already known: the previous record, or
the latest time seen):

    the value congruent to ``ms32`` modulo 2**32 that is nearest to ``ref`` (a gap of
    exactly 2**31 counts as forward, or backward for a gap of -2**31, i.e. the raw
    difference is kept), and never below 0 (a session's time does not go before its
    start; such a value is taken one turn later).

:func:`unwrap_ms` is the rule for one value and imports nothing; :func:`unwrap_ms_array`
is the same rule applied along an array, each value placed next to the one before it
(the first next to ``start``), in bulk with numpy. Tests check that they agree.
"""

from __future__ import annotations

TYPE_CHECKING = False  # numpy is imported where arrays are asked for, typing never
if TYPE_CHECKING:
    import numpy as np

_TURN = 1 << 32
_HALF = 1 << 31
_LOW = _TURN - 1


def unwrap_ms(ms32: int, ref: int) -> int:
    """The full milliseconds of a wrapped u32 value ``ms32``, placed next to ``ref``.

    :param ms32: a record's u32 milliseconds, 0 <= ms32 < 2**32.
    :param ref: a full (unwrapped) time in milliseconds, >= 0, near the record's.
    :returns: the value congruent to ``ms32`` mod 2**32 nearest ``ref``, never below 0.
    """
    full = ref - (ref & _LOW) + ms32
    d = full - ref
    if d < -_HALF:
        full += _TURN
    elif d > _HALF:
        full -= _TURN
    if full < 0:
        full += _TURN
    return full


def unwrap_ms_array(ms32: np.ndarray, start: int) -> np.ndarray:
    """:func:`unwrap_ms` along an array: each value next to the previous full value.

    :param ms32: u32 milliseconds of consecutive records (any integer dtype).
    :param start: the full time (ms, >= 0) the first value is placed next to.
    :returns: int64 full milliseconds, equal to applying :func:`unwrap_ms` in a loop.
    """
    import numpy as np

    ms = ms32.astype(np.int64)
    if not len(ms):
        return ms
    prev = np.empty_like(ms)
    prev[0] = start & _LOW
    prev[1:] = ms[:-1]
    step = ms - prev
    wraps = np.cumsum((step < -_HALF).astype(np.int64) - (step > _HALF).astype(np.int64))
    full = ms + (start - (start & _LOW)) + wraps * _TURN
    if full.min() < 0:
        # "never below 0": the loop adds one turn where a value would go below 0 and
        # keeps it for the values after; the turns needed so far is a running maximum
        need = np.maximum(0, -(full >> 32))
        full += np.maximum.accumulate(need) * _TURN
    return full
