"""The "all ranks" plot of one tag: median line, min–max band, outlying rank.

The band and the outlier rule are :func:`nbcli.series.band` (the one nb plot
and nb report use): the median across ranks of each rank's bucket mean, the min of the
mins and the max of the maxes, and the rank farthest from the median relative to the
band's width. This module only turns the TUI's live :class:`~nblog.reader._views.live.Series` into
that function's frame and its result into a :class:`PlotSpec`.
"""

from __future__ import annotations

import numpy as np

from nblog.reader import Series

from .widgets.plot import FAINT, PALETTE, Fill, Line, PlotSpec


def ranks_band_spec(title: str, per_rank: dict[int, Series], buckets: int, *, logy: bool = False,
                    unit: str = "") -> tuple[PlotSpec, int | None]:
    """The band across ranks of one tag against the step.

    Args:
        title: the tag (the plot's title starts with it).
        per_rank: each rank's series of the tag (empty series are left out).
        buckets: the most buckets along the step axis (about two per plot column).
        logy: draw log10 of the values (finite values ≤ 0 are left out).
        unit: the y unit ("s" for timers).

    Returns:
        the spec, and the outlying rank (None with fewer than two ranks).
    """
    import polars as pl  # the TUI pays for polars only when a band is asked for

    from ..series import band, make_grid
    from ..series import buckets as per_bucket

    have = {r: s for r, s in per_rank.items() if len(s)}
    spec = PlotSpec(title=title, axis="step", logy=logy, yunit=unit)
    if not have:
        spec.message = "no rank logged this tag (yet)"
        return spec, None
    ranks = sorted(have)
    steps = [have[r].step for r in ranks]
    values = [have[r].value for r in ranks]
    if logy:
        with np.errstate(divide="ignore", invalid="ignore"):
            values = [np.where(v > 0, np.log10(np.where(v > 0, v, 1.0)), np.where(np.isfinite(v), np.nan, v))
                      for v in values]
    frame = pl.DataFrame({
        "rank": np.concatenate([np.full(len(s), r, np.int32) for r, s in zip(ranks, steps, strict=True)]),
        "x": np.concatenate(steps),
        "value": np.concatenate(values),
    })
    grid = make_grid(frame["x"].to_numpy(), max(1, buckets))
    b = band(per_bucket(frame, grid), grid)
    x = grid.x().astype(np.float64)
    ok = np.isfinite(b.line)
    if not ok.any():
        spec.message = "no finite value in any rank"
        return spec, None
    n = len(b.ranks)
    if n > 1:
        spec.fills.append(Fill(x[ok], b.lo[ok], b.hi[ok], color=FAINT))
    spec.lines.append(Line(x[ok], b.line[ok], color=PALETTE[0], label="median" if n > 1 else f"rank {ranks[0]}"))
    if b.outlier is not None and b.outlier_line is not None:
        oo = np.isfinite(b.outlier_line)
        spec.lines.append(Line(x[oo], b.outlier_line[oo], color=PALETTE[3], label=f"rank {b.outlier}", dash=1))
        spec.title = f"{title} · median of {n} ranks · band min–max · outlier rank {b.outlier}"
    else:
        spec.title = f"{title} · 1 rank logged it (add_scalar(all_ranks=True) for a band)"
    notes = []
    if grid.bucketed:
        notes.append(f"buckets of {grid.width:g} steps, display only")
    spec.note = " · ".join(notes)
    return spec, b.outlier
