"""What viewers draw from a series: smoothing, display downsampling, buckets and bands.

The one place where the TUI, ``nb plot`` and ``nb report`` (and any viewer to come)
turn points into lines; none of it changes data on disk or in a reader's frames.

- :mod:`._smooth` — the smoothing rule: TensorBoard's debiased exponential moving
  average, :func:`ema` on an array (resumable, for live viewers), :func:`smooth` on a
  frame of many ranks. The page of ``nb report`` applies the same rule in the browser.
- :mod:`._decimate` — :func:`minmax_indices` and :class:`Decimator`: the min and max of
  each bucket of a long series (a spike is never averaged away), display only;
  :func:`step_buckets`: min, max and last value per bucket of steps (``nb serve``).
- :mod:`._bands` — :func:`make_grid` cuts the x axis into buckets, :func:`buckets` keeps
  each rank's mean / min / max per bucket, :func:`band` makes the median line, the
  min-max band and the outlying rank; :func:`points` reads a tag as the frame they take;
  :func:`per_step_totals` and :func:`step_band`: min / median / max across ranks,
  exact per step (timer totals).
- :mod:`._marks` — what viewers mark rather than draw in a line: the non-finite points
  (:func:`nonfinite_indices` in an array, :func:`nonfinite` listed from a frame) and
  :func:`session_starts`.

Non-finite values (NaN, +inf, -inf) have one answer everywhere, TensorBoard's: they
never enter an average, a bucket or a band. Smoothing skips them (they do not move the
average, and its output at such a point is the point itself); buckets and bands count
finite points only; downsampling picks finite points only. Every viewer marks them
instead, at their step: the TUI with ×, ▲, ▼; ``nb plot`` at the top edge (NaN, +inf)
or the bottom edge (-inf); the report's page likewise, from :func:`nonfinite`'s list.
"""

from __future__ import annotations

from ._bands import (
    Band,
    Grid,
    StepBand,
    band,
    buckets,
    make_grid,
    per_step_totals,
    points,
    step_band,
)
from ._decimate import Decimator, minmax_indices, step_buckets
from ._marks import MAX_NONFINITE, nonfinite, nonfinite_indices, session_starts
from ._smooth import EmaState, ema, smooth

__all__ = ["MAX_NONFINITE", "Band", "Decimator", "EmaState", "Grid", "StepBand", "band", "buckets", "ema",
           "make_grid", "minmax_indices", "nonfinite", "nonfinite_indices", "per_step_totals", "points",
           "session_starts", "smooth", "step_band", "step_buckets"]
