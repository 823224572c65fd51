"""What a child of the kill -9 harness logs at each step: a function of (trial, step),
shared by the child (``_k9_child.py``) and the checks (``test_kill9_harness.py``)."""

from __future__ import annotations


def expected_scalars(trial: int, step: int) -> list[tuple[str, float]]:
    """The scalars of one step, in the order they are logged (exact in float64)."""
    base = trial * 1_000_000.0 + step
    return [("train/loss", base + 0.25), ("lr", base + 0.5), ("acc", -base)]


def expected_text(trial: int, step: int) -> str:
    """The text logged every 5 steps on rank 0."""
    return f"trial {trial} step {step} ✓ ünïcode\n\ttab"


def expected_image(trial: int, step: int):
    """The 4x6 RGB image logged every 10 steps on rank 0."""
    import numpy as np

    return ((np.arange(4 * 6 * 3) * 5 + step * 3 + trial * 11) % 256).astype(np.uint8).reshape(4, 6, 3)
