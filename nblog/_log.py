"""nblog's messages, through the standard ``logging`` module under the name "nblog".

``logging`` is imported on the first message, not at ``import nblog`` (it costs more
than the rest of the package). Tests capture the messages with pytest's ``caplog``.
"""

from __future__ import annotations

TYPE_CHECKING = False  # neither typing nor logging is imported here before the first message
if TYPE_CHECKING:
    import logging


def _logger() -> logging.Logger:
    import logging

    return logging.getLogger("nblog")


def warning(msg: str, *args: object) -> None:
    """Log a warning: bad data, a full disk, a rank that cannot log."""
    _logger().warning(msg, *args)


def info(msg: str, *args: object) -> None:
    """Log a note: a restart continuing a run, a missing optional feature."""
    _logger().info(msg, *args)


def debug(msg: str, *args: object) -> None:
    """Log a detail for debugging."""
    _logger().debug(msg, *args)
