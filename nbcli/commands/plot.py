"""``nb plot RUN [RUN...] --tag T -o FILE``: a figure (PNG, SVG, PDF) with matplotlib.

matplotlib (the ``plot`` extra) is imported only here, and only its object API is used
(``matplotlib.figure.Figure``, the Agg renderer): no pyplot state, no window.
"""

from __future__ import annotations

import math
import os
from enum import Enum
from typing import TYPE_CHECKING, Annotated, cast

import typer

from .._options import MAX_RANK, Root
from .._output import error, info, warn

if TYPE_CHECKING:
    import polars as pl
    from matplotlib.axes import Axes

    # (run index, run id, the smoothed points, the raw points) of one run in one panel
    Frames = list[tuple[int, str, pl.DataFrame, pl.DataFrame]]

PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
BAND_ALPHA = 0.25
FORMATS = ("png", "svg", "pdf")
MAX_PIXELS = 20000  # per side


class XAxis(str, Enum):
    step = "step"
    wall = "wall"
    active = "active"


_X_LABEL = {"step": "step", "wall": "wall time since the first point", "active": "active time (queue gaps left out)"}


def _size(text: str) -> tuple[float, float]:
    parts = text.replace("x", ",").split(",")
    try:
        w, h = (float(p) for p in parts)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not W,H in inches (e.g. 6.4,4)", param_hint="--size") from None
    if not (0 < w <= 100 and 0 < h <= 100):
        raise typer.BadParameter(f"{text!r}: width and height must be in (0, 100] inches", param_hint="--size")
    return w, h


def _time_unit(span_s: float) -> tuple[float, str]:
    if span_s >= 2 * 86400:
        return 86400.0, "days"
    if span_s >= 2 * 3600:
        return 3600.0, "h"
    if span_s >= 120:
        return 60.0, "min"
    return 1.0, "s"


def _draw_tag(ax: Axes, tag: str, frames: Frames, x: str, rank_label: str, buckets_max: int,
              scale: float, unit: str) -> None:
    """One axes: each run's line (or median and band), outlier rank and non-finite marks."""
    import numpy as np
    import polars as pl

    from ..report import _series as S

    steps = np.concatenate([f["x"].to_numpy() for _i, _id, f, _raw in frames])
    grid = S.make_grid(steps, buckets_max)  # along steps: ranks are compared at the same steps
    where = "x" if x == "step" else "t"
    for i, run_id, f, raw in frames:
        color = PALETTE[i % len(PALETTE)]
        b = S.band(S.buckets(f, grid), grid)
        gx = (grid.x() if b.at is None else b.at) / scale
        if len(b.ranks) > 1:
            ax.fill_between(gx, b.lo, b.hi, color=color, alpha=BAND_ALPHA, linewidth=0,
                            label=f"{run_id}: min–max of {len(b.ranks)} ranks")
            ax.plot(gx, b.line, color=color, linewidth=1.4, label=f"{run_id}: median")
            if b.outlier is not None and b.outlier_line is not None:  # set together
                ax.plot(gx, b.outlier_line, color=color, linewidth=0.9, linestyle="--",
                        label=f"{run_id}: rank {b.outlier} (farthest from the median)")
        elif grid.bucketed:
            # one vertical stroke per bucket from its min to its max: what the full series
            # would draw at this resolution, spikes included
            ok = ~np.isnan(b.lo)
            ax.plot(np.repeat(gx[ok], 2), np.column_stack([b.lo[ok], b.hi[ok]]).ravel(), color=color,
                    linewidth=1.2, label=f"{run_id}{rank_label}")
        else:
            ax.plot(gx, b.line, color=color, linewidth=1.4, label=f"{run_id}{rank_label}")
        bad = raw.filter(~pl.col("value").is_finite())
        if len(bad):
            v = bad["value"].to_numpy()
            bx = bad[where].to_numpy() / scale
            low = np.isneginf(v)
            kinds = sorted({"NaN" if math.isnan(t) else ("+inf" if t > 0 else "-inf") for t in v.tolist()})
            label: str | None = f"{run_id}: {len(bad)} non-finite ({', '.join(kinds)}) at the edge"
            tr = ax.get_xaxis_transform()
            if (~low).any():
                ax.plot(bx[~low], np.full(int((~low).sum()), 1.0), transform=tr, clip_on=False, linestyle="none",
                        marker="v", markersize=6, color=color, markeredgecolor="black", label=label)
                label = None
            if low.any():
                ax.plot(bx[low], np.zeros(int(low.sum())), transform=tr, clip_on=False, linestyle="none",
                        marker="^", markersize=6, color=color, markeredgecolor="black", label=label)
    ax.set_title(tag, fontsize="medium")
    ax.set_xlabel(_X_LABEL[x] + (f" ({unit})" if unit else ""))
    ax.grid(True, linewidth=0.4, alpha=0.5)
    ax.legend(fontsize="small", loc="best")


def plot(
    runs: Annotated[list[str], typer.Argument(metavar="RUN", help="Runs: ids, unique prefixes, PROJECT/RUN_ID or run folders.", show_default=False)],
    tags: Annotated[list[str], typer.Option("--tag", "-t", metavar="TAG", help="A scalar or timer tag (exact name); repeat for one panel each.", show_default=False)],
    output: Annotated[str, typer.Option("--output", "-o", metavar="FILE", help="The figure: FILE.png, FILE.svg or FILE.pdf.", show_default=False)],
    rank: Annotated[int | None, typer.Option("--rank", "-r", min=0, max=MAX_RANK, metavar="K", help="The rank to draw [default: 0].", show_default=False)] = None,
    all_ranks: Annotated[bool, typer.Option("--all-ranks", help="Every rank: the median line with a min–max band, the outlying rank named.")] = False,
    smooth: Annotated[float, typer.Option("--smooth", metavar="ALPHA", help="Debiased EMA weight in [0, 1) (TensorBoard's slider), on the full series; 0: off.")] = 0.0,
    x: Annotated[XAxis, typer.Option("--x", help="The x axis: step, wall time, or active time (queue gaps between sessions left out).", case_sensitive=False)] = XAxis.step,
    logy: Annotated[bool, typer.Option("--logy", help="Logarithmic y axis.")] = False,
    logx: Annotated[bool, typer.Option("--logx", help="Logarithmic x axis.")] = False,
    size: Annotated[str, typer.Option("--size", metavar="W,H", help="Figure size in inches.")] = "6.4,4",
    dpi: Annotated[int, typer.Option("--dpi", min=10, max=2400, metavar="N", help="Dots per inch (the PNG is W*N x H*N pixels).")] = 150,
    title: Annotated[str | None, typer.Option("--title", metavar="TEXT", help="The figure's title [default: the run ids].", show_default=False)] = None,
    root: Root = None,
) -> None:
    """Draw TAG of each RUN, one panel per --tag, into a PNG, SVG or PDF file.

    Lines are drawn at full resolution: a long series is cut into about one bucket per
    pixel, each drawn from its min to its max, so a one-step spike stays in the figure.
    NaN and +inf points are marked at the top edge, -inf at the bottom, and counted in
    the legend. Needs matplotlib (pip install 'nblog[plot]').
    """
    fmt = os.path.splitext(output)[1].lower().lstrip(".")
    if fmt not in FORMATS:
        raise typer.BadParameter(f"{output!r}: the file must end in .png, .svg or .pdf", param_hint="--output")
    if rank is not None and all_ranks:
        raise typer.BadParameter("--all-ranks and --rank exclude each other", param_hint="--rank")
    if not (0.0 <= smooth < 1.0) or math.isnan(smooth):
        raise typer.BadParameter(f"{smooth:g} is not in [0, 1)", param_hint="--smooth")
    w, h = _size(size)
    if w * dpi > MAX_PIXELS or h * dpi > MAX_PIXELS:
        raise typer.BadParameter(f"{size} at {dpi} dpi is over {MAX_PIXELS} pixels a side", param_hint="--size")
    parent = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(parent):
        raise typer.BadParameter(f"the folder {parent!r} does not exist", param_hint="--output")
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        error("nb plot needs matplotlib", "pip install 'nblog[plot]'")
        raise typer.Exit(1) from None

    from nblog import RunReader
    from nblog.reader import write_output

    from ..report import _series as S

    readers = [RunReader(r, root) for r in runs]
    rank_label = "" if rank is None else f" (rank {rank})"
    want = None if all_ranks else (rank or 0)
    panels: list[tuple[str, Frames]] = []
    for tag in dict.fromkeys(tags):
        frames: Frames = []
        for i, r in enumerate(readers):
            raw = S.points(r, tag, rank=want, x=x.value)
            if not len(raw):
                warn(f"{r.id} has no points of {tag!r}" + ("" if want is None else f" on rank {want}"))
                continue
            frames.append((i, r.id, S.smooth(raw, smooth), raw))
        if not frames:
            known = sorted({t for r in readers for k in ("scalar", "timer") for t in r.tags(want or 0, k)})
            hint = ("; tags: " + ", ".join(known[:20]) + (" ..." if len(known) > 20 else "")) if known else ""
            raise typer.BadParameter(f"no run has points of {tag!r}{hint}", param_hint="--tag")
        panels.append((tag, frames))

    scale, unit = 1.0, ""
    if x != XAxis.step:  # one unit for every panel: they share the x axis
        spans = [float(cast(float, f["t"].max()) - cast(float, f["t"].min())) for _tag, frames in panels for *_a, f, _raw in frames]
        scale, unit = _time_unit(max(spans, default=0.0))
    fig = Figure(figsize=(w, h), dpi=dpi, layout="constrained")
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    for ax, (tag, frames) in zip(axes, panels, strict=True):
        _draw_tag(ax, tag, frames, x.value, rank_label, max(100, int(w * dpi)), scale, unit)
        if logy:
            ax.set_yscale("log")
        if logx:
            ax.set_xscale("log")
    for ax in axes[:-1]:
        ax.set_xlabel("")
    heading = title if title is not None else ", ".join(r.id for r in readers)
    if smooth:
        heading += f" (smoothed, EMA {smooth:g})"
    fig.suptitle(heading, fontsize="medium")
    # SVG keeps its text as text (editable in a paper's figure, searchable)
    with matplotlib.rc_context({"svg.fonttype": "none", "pdf.fonttype": 42}):
        write_output(output, lambda f: fig.savefig(f, format=fmt, dpi=dpi))  # errors: "cannot write X: ..."
    info(f"wrote {output}")


def register(app: typer.Typer) -> None:
    app.command("plot")(plot)
