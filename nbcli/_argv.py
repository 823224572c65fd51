"""The one word scanner of the entry point's fast paths (``nb ls``, ``nb resume-id
--latest``; see :func:`nbcli.app._fast`), which answer a few plain forms without importing
Typer. It accepts only what it is sure about and gives None for the rest, which Typer then
parses and reports as it does for every command."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def scan_argv(
    argv: Sequence[str], valued: Mapping[str, str], flags: Mapping[str, str]
) -> tuple[list[str], list[tuple[str, str]], set[str]] | None:
    """Split ``argv`` into positional words, ``(dest, value)`` pairs of the options in
    ``valued`` (option word -> dest; a value as the next word or, for ``--long`` forms,
    after ``=``) in the order given, and the dests of the ``flags`` seen (option word ->
    dest). Words after ``--`` are positional.

    Returns None, leaving the words to Typer, for an unknown option (``--help`` too), a
    short option with ``=`` or bundled, a missing value, a value that starts with ``-``,
    and a positional ``-``."""
    positional: list[str] = []
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    only_positional = False
    i, n = 0, len(argv)
    while i < n:
        word = argv[i]
        i += 1
        if word == "-":
            return None
        if only_positional or not word.startswith("-"):
            positional.append(word)
            continue
        if word == "--":
            only_positional = True
            continue
        if word in flags:
            seen.add(flags[word])
            continue
        key, eq, value = word.partition("=")
        if eq and not key.startswith("--"):
            return None
        dest = valued.get(key)
        if dest is None:
            return None
        if not eq:
            if i >= n:
                return None
            value = argv[i]
            i += 1
        if value.startswith("-"):
            return None
        pairs.append((dest, value))
    return positional, pairs, seen


__all__ = ["scan_argv"]
