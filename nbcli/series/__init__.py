"""What viewers draw from a series: smoothing, buckets and bands across ranks.

The one place where the TUI, ``nb plot`` and ``nb report`` turn points into lines.
None of it changes data on disk or in a reader's frames. :mod:`._bands`: buckets of the
x axis and the band across ranks (or runs); smoothing; non-finite points.
"""

from __future__ import annotations

from ._bands import MAX_NONFINITE, Band, Grid, band, buckets, make_grid, nonfinite, points, smooth
from ._decimate import (
    Decimator,
    EmaState,
    StepBand,
    ema,
    minmax_indices,
    nonfinite_indices,
    per_step_totals,
    session_starts,
    step_band,
)

__all__ = ["MAX_NONFINITE", "Band", "Decimator", "EmaState", "Grid", "StepBand", "band", "buckets", "ema",
           "make_grid", "minmax_indices", "nonfinite", "nonfinite_indices", "per_step_totals", "points",
           "session_starts", "smooth", "step_band"]
