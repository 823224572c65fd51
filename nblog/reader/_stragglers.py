"""The one straggler rule, shared by ``nb timers``, the TUI timers view and ``nb watch``.

Of one timer's per-rank mean durations: a rank is a **straggler** when its mean is at
least ``threshold`` (default :data:`STRAGGLER_SPREAD`, 1.2) times the median of the ranks'
means, and more than one rank timed it; the **slowest** rank has the highest mean (the
lowest rank of equal ones); the **spread** is the slowest mean over the median mean.
This is what ``nb timers --help`` and ``man nb`` say. Standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

#: A rank whose mean is this many times the median of the ranks' means is a straggler.
STRAGGLER_SPREAD = 1.2


def straggler_rule(means: Mapping[int, float], threshold: float = STRAGGLER_SPREAD) -> dict:
    """Apply the straggler rule to one timer.

    Args:
        means: rank -> the rank's mean duration of the timer, in seconds (one rank or more).
        threshold: the factor over the median mean that makes a straggler (>= 1).

    Returns:
        ``{"slowest_rank", "slowest_mean_s", "median_mean_s", "fastest_rank",
        "fastest_mean_s", "spread", "straggler", "stragglers"}``: ``spread`` is None when
        the median is 0 or the ratio is not finite; ``straggler`` is whether the slowest
        rank straggles; ``stragglers`` lists the ranks that do, ascending.

    Raises:
        ValueError: ``means`` is empty.
    """
    if not means:
        raise ValueError("the straggler rule needs the mean of at least one rank")
    values = sorted(means.values())
    k = len(values)
    median = values[k // 2] if k % 2 else (values[k // 2 - 1] + values[k // 2]) / 2
    slow = max(means, key=lambda r: (means[r], -r))
    fast = min(means, key=lambda r: (means[r], r))
    spread = means[slow] / median if median > 0 else None
    return {
        "slowest_rank": slow,
        "slowest_mean_s": means[slow],
        "median_mean_s": median,
        "fastest_rank": fast,
        "fastest_mean_s": means[fast],
        "spread": spread if spread is None or math.isfinite(spread) else None,
        "straggler": bool(spread is not None and spread >= threshold and k > 1),
        "stragglers": sorted(r for r, m in means.items() if median > 0 and m >= threshold * median and k > 1),
    }


__all__ = ["STRAGGLER_SPREAD", "straggler_rule"]
