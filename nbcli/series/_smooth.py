"""The smoothing rule of every viewer: TensorBoard's debiased exponential moving average.

One implementation, two shapes: :func:`ema` for one array (resumable, so a live viewer
smooths only the points appended since its last call), :func:`smooth` for a frame of
many ranks (each rank on its own). The report's page smooths its bucket means in the
browser (``ema`` in ``report.js``) by the same rule.

The rule, for a weight ``w`` in [0, 1) (the weight kept from the past; 0: no smoothing):
the smoothed value at point ``i`` is ``sum(w^k v[i-k]) / sum(w^k)`` over the finite
points up to ``i`` (``last = last * w + (1 - w) * v``, divided by ``1 - w ** count``).
A NaN or ±inf point does not move the average and is not counted; its own smoothed
value is the point itself (NaN, +inf or -inf), as TensorBoard's slider does. Viewers
draw those points as markers, never as part of a line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import polars as pl

#: The magnitude of ``weight ** -k`` a block of :func:`ema` may reach (stays far from
#: float64 overflow, so the blocked recurrence is exact to rounding).
_EMA_RANGE = 1e120


@dataclass(frozen=True)
class EmaState:
    """Where an :func:`ema` left off: the biased average and how many finite points
    went into it."""

    last: float = 0.0
    count: int = 0


def _check(weight: float) -> None:
    if not 0.0 <= weight < 1.0:
        raise ValueError(f"smoothing weight must be in [0, 1), not {weight}")


def ema(values: np.ndarray, weight: float, state: EmaState | None = None) -> tuple[np.ndarray, EmaState]:
    """The smoothed values of ``values`` by the rule of this module, vectorized.

    Args:
        values: the points in x order (any float dtype).
        weight: in [0, 1); 0 returns the values unchanged.
        state: where a previous call left off: pass the state it returned with the
            values appended since, to extend a smoothed series without recomputing it.

    Returns:
        (smoothed float64 array of the same length, non-finite points as they are;
        state after the last value)

    Raises:
        ValueError: ``weight`` is not in [0, 1).
    """
    _check(weight)
    out = np.array(values, dtype=np.float64)  # a copy: non-finite points stay as they are
    state = state or EmaState()
    finite = np.isfinite(out)
    f = out[finite]
    if not len(f):
        return out, state
    if weight == 0.0:
        return out, EmaState(float(f[-1]), state.count + len(f))
    w = weight
    block = min(len(f), max(1, int(math.log(_EMA_RANGE) / -math.log(w))))
    nblocks = -(-len(f) // block)
    x: np.ndarray = np.zeros(nblocks * block)
    x[: len(f)] = f
    x = x.reshape(nblocks, block)
    wk = w ** np.arange(block, dtype=np.float64)  # w^i: 1 down to >= 1/_EMA_RANGE
    # zero-carry average inside each block: z_i = (1 - w) * sum_{j<=i} w^(i-j) x_j
    x *= 1.0 / wk
    z = np.cumsum(x, axis=1)
    z *= wk
    z *= 1.0 - w
    # carry into each block: c[b+1] = w^block * c[b] + z[b, -1]
    wb = w**block
    carry = np.empty(nblocks)
    last = state.last
    for i, zi in enumerate(z[:, -1].tolist()):
        carry[i] = last
        last = wb * last + zi
    z += np.outer(carry, wk * w)  # + w^(i+1) * carry
    biased = z.reshape(-1)[: len(f)]
    last = float(biased[-1])
    # debias: divide by 1 - w^count, which is 1 to rounding after a few hundred points
    m = min(len(f), max(0, int(40.0 / -math.log(w)) + 1 - state.count))
    if m > 0:
        counts = state.count + np.arange(1, m + 1, dtype=np.float64)
        biased[:m] = biased[:m] / (1.0 - w**counts)
    out[finite] = biased
    return out, EmaState(last, state.count + len(f))


def smooth(frame: pl.DataFrame, weight: float) -> pl.DataFrame:
    """``frame`` with ``value`` replaced by its smoothed values (:func:`ema`), each rank
    on its own, in x order.

    Args:
        frame: columns rank, x, value (other columns kept).
        weight: in [0, 1); 0 returns ``frame`` as is.

    Returns:
        the frame sorted by rank and x (ties keep their order), non-finite values as
        they are.

    Raises:
        ValueError: ``weight`` is not in [0, 1).
    """
    import polars as pl

    _check(weight)
    if weight == 0.0 or not len(frame):
        return frame
    out = frame.sort("rank", "x", maintain_order=True)
    rank = out["rank"].to_numpy()
    value = out["value"].to_numpy()
    cuts = np.flatnonzero(rank[1:] != rank[:-1]) + 1
    smoothed = np.concatenate([ema(part, weight)[0] for part in np.split(value, cuts)])
    return out.with_columns(pl.Series("value", smoothed, pl.Float64))
