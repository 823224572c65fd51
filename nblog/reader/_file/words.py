"""How a count reads in a message of the reader or of ``nb``: ``1 row``, ``2 rows``.

One rule for every message that counts something (``wrote 1 row``, ``0 alerts``,
``1 rank``), so none says ``1 rows``. Standard library only: ``nb ls`` imports it.
"""

from __future__ import annotations


def plural(count: int, noun: str, nouns: str | None = None, *, sep: bool = False) -> str:
    """``count`` and the noun in the number that ``count`` asks for.

    Args:
        count: how many (1 and -1 take the singular; 0 and every other number the plural).
        noun: the singular (``"row"``).
        nouns: the plural when it is not ``noun + "s"`` (``"matches"``, ``"were"``).
        sep: write ``count`` with thousands separators (``20,000 runs``).

    Returns:
        ``"1 row"``, ``"0 rows"``, ``"20,000 runs"`` (with ``sep``).
    """
    number = f"{count:,}" if sep else str(count)
    return f"{number} {noun if abs(count) == 1 else (nouns if nouns is not None else noun + 's')}"


__all__ = ["plural"]
