"""``nb plot RUN [RUN...] [--tag GLOB] -o FILE``: a figure (PNG, SVG, PDF) with matplotlib.

matplotlib (the ``plot`` extra) is imported only here, and only its object API is used
(``matplotlib.figure.Figure``, the Agg renderer): no pyplot state, no window.

Tags are chosen by the rule every command shares (:func:`nblog.reader.tag_matcher`:
shell-style globs, every tag when none is given), among the scalar and timer tags the
runs define on the ranks drawn; a panel is drawn for each that has points.
"""

from __future__ import annotations

import math
import os
import textwrap
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

from .._options import MAX_RANK, AllowDamaged, Root, Tags
from .._output import error, info, warn

if TYPE_CHECKING:
    import numpy as np
    import polars as pl
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from nblog import RunReader

    # (run index, run id, the smoothed points, the raw points) of one run in one panel
    Frames = list[tuple[int, str, pl.DataFrame, pl.DataFrame]]

PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
BAND_ALPHA = 0.25
FORMATS = ("png", "svg", "pdf")
MAX_PIXELS = 20000  # per side
MAX_PANELS = 64  # one per tag
PANEL_W, PANEL_H, TITLE_H = 6.4, 3.4, 0.6  # inches: the default size of a panel and the title


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


def _line(ax: Axes, x: np.ndarray, y: np.ndarray, **style: Any) -> None:
    """A line through the finite values of ``y`` (the gaps of a bucket with no finite
    point are spanned, as the report's charts do); a line of one point has no segment
    to draw, so it is drawn as a marker (a metric logged once is still seen)."""
    import numpy as np

    ok = np.isfinite(y)
    if ok.sum() == 1:
        style = {"marker": "o", "markersize": 5, **style}
    ax.plot(x[ok], y[ok], **style)


def _draw_tag(ax: Axes, tag: str, frames: Frames, x: str, rank_label: str, buckets_max: int,
              scale: float, unit: str) -> None:
    """One axes: each run's line (or median and band), outlier rank and non-finite marks;
    the legend is drawn by :func:`_legend_below` once the axes' labels are known."""
    import numpy as np
    import polars as pl

    from .. import series as S

    steps = np.concatenate([f["x"].to_numpy() for _i, _id, f, _raw in frames])
    grid = S.make_grid(steps, buckets_max)  # along steps: ranks are compared at the same steps
    where = "x" if x == "step" else "t"
    for i, run_id, f, raw in frames:
        color = PALETTE[i % len(PALETTE)]
        b = S.band(S.buckets(f, grid), grid)
        gx = (grid.x() if b.at is None else b.at) / scale
        if len(b.ranks) > 1:
            ok = np.isfinite(b.lo)
            if ok.sum() == 1:  # one step: fill_between has no width, so a stroke from min to max
                ax.vlines(gx[ok], b.lo[ok], b.hi[ok], color=color, alpha=BAND_ALPHA * 2, linewidth=6,
                          label=f"{run_id}: min–max of {len(b.ranks)} ranks")
            else:
                ax.fill_between(gx, b.lo, b.hi, color=color, alpha=BAND_ALPHA, linewidth=0,
                                label=f"{run_id}: min–max of {len(b.ranks)} ranks")
            _line(ax, gx, b.line, color=color, linewidth=1.4, label=f"{run_id}: median")
            if b.outlier is not None and b.outlier_line is not None:  # set together
                _line(ax, gx, b.outlier_line, color=color, linewidth=0.9, linestyle="--",
                      label=f"{run_id}: rank {b.outlier} (farthest from the median)")
        elif grid.bucketed:
            # one vertical stroke per bucket from its min to its max: what the full series
            # would draw at this resolution, spikes included
            ok = ~np.isnan(b.lo)
            one: dict[str, Any] = {"marker": "o", "markersize": 5} if ok.sum() == 1 else {}  # a lone bucket
            ax.plot(np.repeat(gx[ok], 2), np.column_stack([b.lo[ok], b.hi[ok]]).ravel(), color=color,
                    linewidth=1.2, label=f"{run_id}{rank_label}", **one)
        else:
            _line(ax, gx, b.line, color=color, linewidth=1.4, label=f"{run_id}{rank_label}")
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


def _legend_below(ax: Axes, fig: Figure, width_in: float, labelled: bool) -> None:
    """The legend under the axes, never over the data ("best" still covers it when a band
    fills the panel, as time/step of every rank does); constrained layout makes room.

    It hangs a fixed distance in points under the axes, clear of the x tick labels and
    the x label when ``labelled`` (the lowest panel of a column), of the ticks otherwise.
    Entries go side by side in as many columns as the panel's ``width_in`` holds.
    """
    import matplotlib as mpl
    from matplotlib.font_manager import FontProperties
    from matplotlib.transforms import offset_copy

    handles, labels = ax.get_legend_handles_labels()
    if not labels:
        return
    rc = mpl.rcParams
    below = rc["xtick.major.size"] + rc["xtick.major.pad"] + 2
    if labelled:
        below += 1.3 * (FontProperties(size=rc["xtick.labelsize"]).get_size_in_points()
                        + FontProperties(size=rc["axes.labelsize"]).get_size_in_points()) + rc["axes.labelpad"]
    # an entry: its text (about 0.6 em a character) after the sample line and the gaps
    # (0.6 in); a text wider than the panel is wrapped, so the legend never gets wider
    char_in = 0.6 * FontProperties(size="small").get_size_in_points() / 72
    fit = max(12, int((width_in - 0.6) / char_in))
    labels = [textwrap.fill(t, fit, break_long_words=False, break_on_hyphens=False) for t in labels]
    entry_in = max(len(line) for t in labels for line in t.split("\n")) * char_in + 0.6
    cols = max(1, min(len(labels), int(width_in // entry_in)))
    ax.legend(handles, labels, fontsize="small", loc="upper center", bbox_to_anchor=(0.5, 0.0),
              bbox_transform=offset_copy(ax.transAxes, fig, y=-below, units="points"),
              ncols=cols, borderaxespad=0.0, frameon=False)


def _defined_tags(reader: RunReader, want: int | None) -> list[str]:
    """The scalar and timer tags ``reader`` defines on rank ``want`` (None: every rank)."""
    ranks = reader.ranks() if want is None else [want]
    return sorted({t for r in ranks for kind in ("scalar", "timer") for t in reader.tags(r, kind)})


def _tags_with_points(readers: list[RunReader], want: int | None) -> list[str]:
    """The scalar and timer tags that have at least one readable point in any of
    ``readers`` on rank ``want`` (None: every rank): what a hint may offer."""
    names: set[str] = set()
    for r in readers:
        for read in (r.scalars, r.timers):
            df = read(None, all_ranks=True) if want is None else read(None, rank=want)
            names.update(df["tag"].unique().to_list())
    return sorted(names)


def _choose_tags(readers: list[RunReader], patterns: list[str] | None, want: int | None) -> list[str]:
    """The tags to draw, in the order of ``patterns`` (each one's matches sorted by name;
    every tag, sorted, when there is no pattern), by the rule every ``--tag`` shares.

    Raises:
        typer.BadParameter: a pattern matches no tag any run defines.
    """
    from nblog.reader import tag_matcher

    defined = sorted({t for r in readers for t in _defined_tags(r, want)})
    if not patterns:
        return defined
    chosen: dict[str, None] = {}
    missing = []
    for pattern in dict.fromkeys(patterns):
        hits = [t for t in defined if tag_matcher(pattern)(t)]
        if not hits:
            missing.append(pattern)
        chosen.update(dict.fromkeys(hits))
    for pattern in missing if chosen else ():
        warn(f"no run has a scalar or timer tag matching {pattern!r}" + ("" if want is None else f" on rank {want}"))
    if not chosen:
        raise typer.BadParameter(f"no run has points of {missing[0]!r}" + _tags_hint(readers, want), param_hint="--tag")
    return list(chosen)


def _tags_hint(readers: list[RunReader], want: int | None) -> str:
    known = _tags_with_points(readers, want)
    if not known:
        return "; no scalar or timer point could be read" + ("" if want is None else f" on rank {want}")
    return "; tags with points: " + ", ".join(known[:20]) + (" ..." if len(known) > 20 else "")


def _names(tags: list[str], most: int = 10) -> str:
    return ", ".join(repr(t) for t in tags[:most]) + (f" and {len(tags) - most} more" if len(tags) > most else "")


def _layout(panels: int) -> tuple[int, int]:
    """(rows, columns) of the panels: one column up to 3 panels, 2 up to 8, then 3."""
    cols = 1 if panels <= 3 else 2 if panels <= 8 else 3
    return math.ceil(panels / cols), cols


def _x_limits(ax: Axes, frames: list[Frames], x: str, scale: float, logx: bool) -> None:
    """A single x value (one step, one sample) gets a range around it instead of
    matplotlib's ±5 % (steps 9.5 to 10.5 labelled in fractions): the step ±1, or the time
    ±1 of its unit; steps are labelled with whole numbers."""
    import numpy as np
    from matplotlib.ticker import MaxNLocator

    col = "x" if x == "step" else "t"
    values = np.unique(np.concatenate([f[col].to_numpy() for fr in frames for *_a, f, _raw in fr]) / scale)
    if len(values) == 1:
        v = float(values[0])
        if not logx:
            ax.set_xlim(v - 1, v + 1)
        elif v > 0:
            ax.set_xlim(v / 2, v * 2)
    if x == "step" and not logx:
        ax.xaxis.set_major_locator(MaxNLocator(nbins="auto", integer=True))


def plot(
    runs: Annotated[list[str], typer.Argument(metavar="RUN", help="Runs: ids, unique prefixes, PROJECT/RUN_ID or run folders.", show_default=False)],
    output: Annotated[str, typer.Option("--output", "-o", metavar="FILE", help="The figure: FILE.png, FILE.svg or FILE.pdf.", show_default=False)],
    tags: Tags = None,
    rank: Annotated[int | None, typer.Option("--rank", "-r", min=0, max=MAX_RANK, metavar="K", help="The rank to draw [default: 0].", show_default=False)] = None,
    all_ranks: Annotated[bool, typer.Option("--all-ranks", help="Every rank: the median line with a min–max band, the outlying rank named.")] = False,
    smooth: Annotated[float, typer.Option("--smooth", metavar="ALPHA", help="Debiased EMA weight in [0, 1) (TensorBoard's slider), on the full series; 0: off.")] = 0.0,
    x: Annotated[XAxis, typer.Option("--x", help="The x axis: step, wall time, or active time (queue gaps between sessions left out).", case_sensitive=False)] = XAxis.step,
    logy: Annotated[bool, typer.Option("--logy", help="Logarithmic y axis.")] = False,
    logx: Annotated[bool, typer.Option("--logx", help="Logarithmic x axis.")] = False,
    size: Annotated[str | None, typer.Option("--size", metavar="W,H", help="Figure size in inches [default: 6.4,4 for one panel; 6.4 wide and 3.4 tall per panel (+0.6 for the title) for several].", show_default=False)] = None,
    dpi: Annotated[int, typer.Option("--dpi", min=10, max=2400, metavar="N", help="Dots per inch (the PNG is W*N x H*N pixels).")] = 150,
    title: Annotated[str | None, typer.Option("--title", metavar="TEXT", help="The figure's title [default: the run ids].", show_default=False)] = None,
    root: Root = None,
    allow_damaged: AllowDamaged = False,
) -> None:
    """Draw the scalar and timer tags of each RUN, one panel per tag, into a PNG, SVG or
    PDF file: every tag, or those matching --tag (a name or a shell-style glob).

    Lines are drawn at full resolution: a long series is cut into about one bucket per
    pixel, each drawn from its min to its max, so a one-step spike stays in the figure;
    a series of one point (a metric logged once) is drawn as a dot.
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
    given = _size(size) if size is not None else None
    if given is not None and (given[0] * dpi > MAX_PIXELS or given[1] * dpi > MAX_PIXELS):
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
    from nblog.reader.lowlevel import write_output

    from .. import series as S

    readers = [RunReader(r, root) for r in runs]
    rank_label = "" if rank is None else f" (rank {rank})"
    want = None if all_ranks else (rank or 0)
    on_rank = "" if want is None else f" on rank {want}"
    panels: list[tuple[str, Frames]] = []
    empty: list[str] = []  # tags defined (a tag record was read) without a readable point
    lacking: dict[str, list[str]] = {r.id: [] for r in readers}  # per run: tags drawn without it
    for tag in _choose_tags(readers, tags, want):
        frames: Frames = []
        for i, r in enumerate(readers):
            raw = S.points(r, tag, rank=want, x=x.value)
            if len(raw):
                frames.append((i, r.id, S.smooth(raw, smooth), raw))
        if not frames:
            empty.append(tag)
            continue
        for r in readers:
            if all(run_id != r.id for _i, run_id, _f, _raw in frames):
                lacking[r.id].append(tag)
        panels.append((tag, frames))
    if not panels:
        if tags:
            raise typer.BadParameter(f"no run has points of {', '.join(repr(t) for t in tags)}"
                                     + _tags_hint(readers, want), param_hint="--tag")
        error(f"no run has a readable scalar or timer point{on_rank}", "nb show RUN says what its event logs hold")
        raise typer.Exit(1)
    if empty:  # the tag records were read, but no point of them: a torn tail, nothing flushed yet
        warn(f"no run has a readable point of {_names(empty)}{on_rank}; nb show RUN says what its event logs hold")
    for run_id, missed in lacking.items():
        if missed:
            warn(f"{run_id} has no points of {_names(missed)}{on_rank}")
    if len(panels) > MAX_PANELS:
        raise typer.BadParameter(f"{len(panels)} tags are more than {MAX_PANELS} panels; choose some with --tag GLOB",
                                 param_hint="--tag")
    rows, cols = _layout(len(panels))
    w, h = given if given is not None else (PANEL_W * cols, 4.0 if rows * cols == 1 else TITLE_H + PANEL_H * rows)
    if w * dpi > MAX_PIXELS or h * dpi > MAX_PIXELS:
        raise typer.BadParameter(f"{len(panels)} panels of the default size at {dpi} dpi are over {MAX_PIXELS} "
                                 "pixels a side; give --size or fewer tags", param_hint="--size")

    scale, unit = 1.0, ""
    if x != XAxis.step:  # one unit for every panel: they share the x axis
        spans = [float(cast(float, f["t"].max()) - cast(float, f["t"].min())) for _tag, frames in panels for *_a, f, _raw in frames]
        scale, unit = _time_unit(max(spans, default=0.0))
    fig = Figure(figsize=(w, h), dpi=dpi, layout="constrained")
    grid = fig.subplots(rows, cols, sharex=True, squeeze=False)
    axes = [grid[k // cols, k % cols] for k in range(len(panels))]
    for ax in grid.ravel()[len(panels):]:
        ax.remove()
    for k, (ax, (tag, frames)) in enumerate(zip(axes, panels, strict=True)):
        _draw_tag(ax, tag, frames, x.value, rank_label, max(100, int(w * dpi / cols)), scale, unit)
        if logy:
            ax.set_yscale("log")
        if logx:
            ax.set_xscale("log")
        lowest = k + cols >= len(panels)
        if not lowest:  # a panel below shares this x axis and labels it
            ax.set_xlabel("")
        else:  # the lowest of its column: shared axes hide tick labels above the last row
            ax.xaxis.set_tick_params(labelbottom=True)
        _legend_below(ax, fig, w / cols, lowest)
    _x_limits(axes[0], [frames for _tag, frames in panels], x.value, scale, logx)
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
