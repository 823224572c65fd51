"""Checks, rejections and strict mode: what the logging calls do with bad input.

Bad data in the training loop never raises (STYLE.md, "What we take" 5): a bad tag,
value or step is skipped, counted in the session's ``dropped`` counters (written in
its END record; held until this rank's writer exists) and warned once per (call site,
tag), the call site being the first frame outside nblog. With ``NB_STRICT=1``
(``init(strict=True)``) the same input raises ``StrictModeError`` instead. A step
below a tag's highest in the session is stored and warned once per tag (strict:
raised). nblog's own errors are warned once per kind and counted as ``internal``.

:class:`Checks` is the part of :class:`nblog.Run` that does this; the checks of a
value (``_scalars``) and of a tag (``_tags``) call it. Its state, set by
:meth:`Checks._init_checks`: ``_strict``, ``_warned`` (the warning keys given) and
``_dropped_before_writer``.
"""

from __future__ import annotations

import os
import sys

from .. import _log as log
from .._errors import StrictModeError

TYPE_CHECKING = False  # typing is not imported: `import nblog` stays light
if TYPE_CHECKING:
    from types import FrameType
    from typing import Any

    from ._writer import Writer

STEP_END = 1 << 63  # steps are stored as int64: a step is in [0, STEP_END)
# nblog's own code: the package folder and its wings (integrations/ is the caller's side)
_NBLOG_DIR = os.path.dirname(os.path.abspath(sys.modules[__name__.partition(".")[0]].__file__ or ""))
_NBLOG_DIRS = frozenset([_NBLOG_DIR] + [os.path.join(_NBLOG_DIR, w) for w in ("format", "write", "media", "system", "reader")])


class Checks:
    """Rejecting, counting and warning for :class:`nblog.Run` (see the module docstring)."""

    _writer: Writer | None  # the session's writer (Run._ensure_writer); None until it exists

    def _init_checks(self, strict: bool) -> None:
        self._strict = strict
        self._warned: set = set()
        self._dropped_before_writer: dict[str, int] = {}

    def _check_step(self, step: Any, tag: object) -> int | None:
        """``step`` as an int in [0, 2**63) (a numpy or torch integer converted), or None:
        refused (a bool, no integer, out of range) through :meth:`_reject`. The logging
        calls take a plain int in range without calling this."""
        if isinstance(step, bool):
            self._reject("bad_step", tag, "step must be an int, got bool")
            return None
        if not isinstance(step, int):
            try:
                index = step.__index__  # numpy and torch integers
            except AttributeError:
                self._reject("bad_step", tag, f"step must be a non-negative int, got {type(step).__name__}")
                return None
            try:
                step = int(index())
            except Exception:
                self._reject("bad_step", tag, f"step {step!r} is not an integer")
                return None
        if not 0 <= step < STEP_END:
            self._reject("bad_step", tag, f"step must be in [0, 2**63), got {step}")
            return None
        return step

    def _reject(self, counter: str, tag: object, message: str) -> None:
        """Bad data: count it, warn once per (call site, tag); raise if strict."""
        if self._strict:
            raise StrictModeError(f"nblog: {message} (tag {tag!r}); raised (strict mode, NB_STRICT=1), "
                                  "the point is not stored", tag=tag)
        self._count(counter)
        try:
            key = (_call_site(), repr(tag)[:200])
        except Exception:
            key = ("?", "?")
        if key not in self._warned:
            self._warned.add(key)
            log.warning("nblog: %s (tag %.200r at %s); the point is skipped", message, tag, key[0])

    def _count(self, counter: str, n: int = 1) -> None:
        """Count ``n`` dropped items in the session's ``counter`` (written in its END
        record); held until this rank's writer exists."""
        writer = self._writer
        if writer is not None:
            writer.dropped[counter] += n
        else:
            held = self._dropped_before_writer
            held[counter] = held.get(counter, 0) + n

    def _step_back(self, tag: object, step: int, high: int) -> None:
        """A tag logged at a step below its highest in this session: stored, warned once
        per tag (raises in strict mode). A resumed session starts its own record."""
        message = f"nblog: tag {tag!r} logged at step {step}, lower than its step {high} earlier in this session"
        hint = "a restart from a checkpoint belongs in a new session: init(resume='auto')"
        if self._strict:
            raise StrictModeError(f"{message}; raised (strict mode, NB_STRICT=1), the point is not stored "
                                  f"({hint})", tag=tag)
        message += f"; stored, and readers show both ({hint})"
        self._warn_once(("step_back", tag), message)

    def _internal(self, err: Exception) -> None:
        """An error of nblog's own in a logging call: warned once per kind, counted as
        ``internal`` once the writer exists; never raised into training."""
        self._warn_once(("internal", type(err)), f"nblog: internal error, point skipped: {err!r}")
        if self._writer is not None:
            self._writer.dropped["internal"] += 1

    def _warn_once(self, key: tuple, message: str) -> None:
        """Log ``message`` as a warning once per ``key`` in this run."""
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message)


def _call_site() -> str:
    """``file:line`` of the first frame outside nblog (the user's logging call)."""
    f: FrameType | None = sys._getframe(1)
    while f is not None and os.path.dirname(os.path.abspath(f.f_code.co_filename)) in _NBLOG_DIRS:
        f = f.f_back
    return f"{f.f_code.co_filename}:{f.f_lineno}" if f is not None else "?"

