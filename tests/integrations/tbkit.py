"""Reading event files as TensorBoard shows them: its multiplexer and data provider (what
``tensorboard --logdir`` serves), every point kept (no reservoir sampling)."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple


class Series(NamedTuple):
    points: list[tuple[int, float, float]]  # (step, value, wall time)
    description: str  # the summary description (nb's timers say so)


def tensorboard_scalars(logdir: Path | str) -> dict[str, dict[str, Series]]:
    """run (folder relative to ``logdir``) -> tag -> the scalar series TensorBoard shows,
    simple values and scalar tensors of the scalars plugin alike."""
    from tensorboard import context
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer

    mux = plugin_event_multiplexer.EventMultiplexer(tensor_size_guidance={"scalars": 0})
    mux.AddRunsFromDirectory(str(logdir))
    mux.Reload()
    provider = data_provider.MultiplexerDataProvider(mux, str(logdir))
    ctx = context.RequestContext()
    listed = provider.list_scalars(ctx, experiment_id="", plugin_name="scalars")
    data = provider.read_scalars(ctx, experiment_id="", plugin_name="scalars", downsample=1 << 30)
    return {run: {tag: Series([(d.step, d.value, d.wall_time) for d in data[run][tag]], series.description)
                  for tag, series in tags.items()}
            for run, tags in listed.items()}
