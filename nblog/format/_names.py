"""Checking names that become path components, and slugs for run ids."""

from __future__ import annotations

import re

_SLUG_BAD = re.compile(r"[^a-z0-9._-]+")


def check_name(value: object, what: str) -> str:
    """Return ``value`` if it is safe as one path component, else raise ``ValueError``.

    Refused: non-strings, the empty string and whitespace-only ones, ``.``, anything containing ``..``, ``/`` and ``\\``, NUL and
    other control characters (C0, DEL, C1), lone surrogates (no UTF-8 form, so no file name)
    and names over 200 bytes of UTF-8. ``what`` names the argument in the message.
    """
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a string, got {type(value).__name__}")
    if value == "":
        raise ValueError(f"{what} must not be empty")
    if not value.strip():
        raise ValueError(f"{what} {value!r} must not be blank (whitespace only)")
    if value == "." or ".." in value:
        raise ValueError(f"{what} {value!r} must not be '.' or contain '..'")
    if "/" in value or "\\" in value:
        raise ValueError(f"{what} {value!r} must not contain '/' or '\\'")
    if any(ord(c) < 32 or 127 <= ord(c) < 160 for c in value):
        raise ValueError(f"{what} {value!r} must not contain NUL or control characters")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError(f"{what} {value!r} is not valid Unicode text (lone surrogate)") from None
    if size > 200:
        raise ValueError(f"{what} must be at most 200 bytes of UTF-8")
    return value


def slug(name: str | None) -> str:
    """Lowercase ``name`` into ``[a-z0-9._-]`` (at most 40 chars); ``"run"`` if nothing is left."""
    if not name:
        return "run"
    s = _SLUG_BAD.sub("-", name.lower()).strip("-.")
    return s[:40].strip("-.") or "run"
