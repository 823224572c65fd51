"""What viewers mark instead of drawing in a line: the non-finite points (NaN, +inf,
-inf; by the rule of :mod:`nbcli.series` they never enter a line, a bucket or a band)
and the starts of sessions.

- :func:`nonfinite_indices` — where they are in an array (the TUI's markers).
- :func:`nonfinite` — the first of them in a frame of many ranks, and how many there are
  in all (the report's page lists them; never dropped silently).
- :func:`session_starts` — where a new session begins along an x axis.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import polars as pl

MAX_NONFINITE = 200  # non-finite points listed per series (the total is always given)


def nonfinite_indices(y: np.ndarray) -> dict[str, np.ndarray]:
    """Indices of NaN, +inf and -inf values: ``{"nan": ..., "+inf": ..., "-inf": ...}``."""
    y = np.asarray(y, dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(y))
    vals = y[bad]
    return {
        "nan": bad[np.isnan(vals)],
        "+inf": bad[vals == np.inf],
        "-inf": bad[vals == -np.inf],
    }


def nonfinite(frame: pl.DataFrame, limit: int = MAX_NONFINITE) -> tuple[list[dict], int]:
    """The NaN and ±inf points of ``frame`` (columns rank, x, value): the first
    ``limit`` in x order as ``{"rank", "x", "value"}`` (value "nan", "inf" or "-inf"),
    and how many there are in all."""
    import polars as pl

    bad = frame.filter(~pl.col("value").is_finite())
    total = len(bad)
    rows = []
    for r in bad.sort("x", "rank").head(limit).iter_rows(named=True):
        v = r["value"]
        rows.append({"rank": int(r["rank"]), "x": r["x"],
                     "value": "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")})
    return rows, total


def session_starts(session: np.ndarray, x: np.ndarray) -> list[tuple[int, float]]:
    """``(session, x)`` of the first point of every session after the first one."""
    session = np.asarray(session)
    if len(session) < 2:
        return []
    idx = np.flatnonzero(np.diff(session) != 0) + 1
    return [(int(session[i]), float(x[i])) for i in idx]
