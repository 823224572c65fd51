"""Selecting tags by shell-style globs: the one rule ``nb tail``, ``nb show``,
``nb timers``, ``nb media`` and ``nb export`` share for ``--tag GLOB``.

Standard library only.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable


def tag_matcher(patterns: str | Iterable[str] | None) -> Callable[[str], bool]:
    """A predicate that is true for tags matching any shell-style glob in ``patterns``
    (``*``, ``?``, ``[...]``; case-sensitive, ``*`` also matches ``/``; ``None`` matches
    every tag, an empty list none). Results are cached per tag."""
    if patterns is None:
        return lambda _tag: True
    pats = [patterns] if isinstance(patterns, str) else list(patterns)
    cache: dict[str, bool] = {}

    def match(tag: str) -> bool:
        hit = cache.get(tag)
        if hit is None:
            hit = cache[tag] = any(fnmatch.fnmatchcase(tag, p) for p in pats)
        return hit

    return match


__all__ = ["tag_matcher"]


def tag_set(tags: str | Iterable[str] | None) -> set[str] | None:
    """Exact tag names as a set: one name, several, or None (every tag). No globs: the
    bulk readers' ``tags=`` argument (``RunReader.scalars``, ``media``, ...)."""
    if tags is None:
        return None
    if isinstance(tags, str):
        return {tags}
    return set(tags)
