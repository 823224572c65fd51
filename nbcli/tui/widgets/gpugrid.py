"""Machines × GPUs, each cell the latest utilization, coloured: the idle or throttled
GPU of a large job stands out."""

from __future__ import annotations

import math

from rich.text import Text
from textual.widgets import Static

from ..text import clean


def util_style(v: float | None) -> str:
    """Background by utilization: red when idle, yellow when low, green when busy."""
    if v is None or not math.isfinite(v):
        return "on #303030"
    if v < 10:
        return "bold white on #af0000"
    if v < 50:
        return "black on #d7af00"
    if v < 80:
        return "black on #87af5f"
    return "black on #00af5f"


def grid_text(rows: list[tuple[str, list[float | None]]], width: int = 100) -> Text:
    """``rows`` of (hostname, utilization per GPU index) as a coloured grid."""
    if not rows:
        return Text("no GPU metrics (no machine recorded system/gpu*/utilization_percent)", style="dim")
    ngpu = max((len(u) for _h, u in rows), default=0)
    if ngpu == 0:  # machines without GPUs (or without NVML): no empty grid under a header
        hosts = ", ".join(clean(h) for h, _u in rows[:4]) + (f" and {len(rows) - 4} more" if len(rows) > 4 else "")
        return Text(f"no GPUs recorded on {hosts} (CPU and memory only)", style="dim")
    name_w = min(max(len(clean(h)) for h, _u in rows), 24)
    out = Text(no_wrap=True, end="")
    out.append(" " * name_w + " ", style="dim")
    out.append(" ".join(f"g{i:<2}" for i in range(ngpu)), style="dim")
    out.append("   GPU utilization %, latest sample", style="dim italic")
    for host, utils in rows:
        out.append("\n")
        out.append(clean(host)[:name_w].ljust(name_w) + " ")
        if not utils:
            out.append("no GPUs recorded", style="dim")
        for i in range(ngpu):
            v = utils[i] if i < len(utils) else None
            label = " - " if v is None or not math.isfinite(v) else f"{min(v, 999):3.0f}"
            out.append(label, style=util_style(v))
            out.append(" ")
    return out


class GpuGrid(Static):
    """The grid; call :meth:`show` with rows of (hostname, [util per GPU])."""

    DEFAULT_CSS = "GpuGrid { height: auto; max-height: 10; }"

    def show(self, rows: list[tuple[str, list[float | None]]]) -> None:
        self.update(grid_text(rows))
