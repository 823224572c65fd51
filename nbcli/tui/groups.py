"""Runs grouped by a config key (``g`` in the runs screen, ``nb tui --group KEY``):
per tag, each group's mean over its runs with the min–max band of those runs.

The buckets and the band are :mod:`nbcli.series` (the ones nb plot and nb
report use), with the group's runs in place of a run's ranks; the line is the mean of
the runs' bucket means (Aim's seed groups), drawn with the band's min and max as two
faint lines of the group's colour, which keeps overlapping groups apart in a terminal.
"""

from __future__ import annotations

import numpy as np

from nblog.reader import Series

from .widgets.plot import PALETTE, Line, PlotSpec

MISSING = "(unset)"


def config_value(meta: dict, key: str) -> str:
    """The value of the flattened config key ``key`` ("optim.lr") in a run.json
    ``meta``, written for a legend; :data:`MISSING` when the run has no such key."""
    node: object = meta.get("config") if isinstance(meta, dict) else None
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return MISSING
        node = node[part]
    if isinstance(node, float):
        return f"{node:g}"
    return str(node)


def _order(label: str) -> tuple:
    """Groups in the order of their values: numbers by size, then the rest by name."""
    try:
        return (0, float(label), "")
    except ValueError:
        return (1, 0.0, label)


def groups_spec(title: str, key: str, groups: dict[str, list[Series]], buckets: int) -> PlotSpec:
    """One plot of one tag: per group (value of ``key`` → its runs' series of the tag)
    the mean line and the min–max band, against the step.

    Args:
        title: the tag.
        key: the config key the runs are grouped by (for the title).
        groups: group label → the series of that group's runs (empty ones are left out).
        buckets: the most buckets along the step axis.

    The legend names each group by its value and its number of runs ("0.001 ×2").
    """
    import polars as pl  # only when groups are drawn

    from ..series import band, make_grid
    from ..series import buckets as per_bucket

    # short: the legend (one entry per group) shares the title's row
    spec = PlotSpec(title=f"{title} by {key}", axis="step")
    frames = {}
    for label in sorted(groups, key=_order):
        series = groups[label]
        have = [s for s in series if len(s)]
        if have:
            frames[label] = pl.DataFrame({
                "rank": np.concatenate([np.full(len(s), i, np.int32) for i, s in enumerate(have)]),
                "x": np.concatenate([s.step for s in have]),
                "value": np.concatenate([s.value for s in have]),
            })
    if not frames:
        spec.message = "no run of these groups logged this tag (yet)"
        return spec
    grid = make_grid(np.concatenate([f["x"].to_numpy() for f in frames.values()]), max(1, buckets))
    x = grid.x().astype(np.float64)
    for i, (label, frame) in enumerate(frames.items()):
        per = per_bucket(frame, grid)
        b = band(per, grid)
        mean = np.full(grid.count, np.nan)
        m = per.group_by("bucket").agg(pl.col("mean").mean())
        mean[m["bucket"].to_numpy()] = m["mean"].to_numpy()
        color = PALETTE[i % len(PALETTE)]
        ok = np.isfinite(mean)
        n = len(b.ranks)
        if n > 1:
            for edge in (b.lo, b.hi):
                spec.lines.append(Line(x[ok], edge[ok], color=color, faint=True))
        spec.lines.append(Line(x[ok], mean[ok], color=color, dash=i,
                               label=f"{label} ×{n}"))
    spec.note = "mean, min–max of runs" + (f" · buckets of {grid.width:g} steps" if grid.bucketed else "")
    return spec
