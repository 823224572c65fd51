"""The hot path: ``add_scalar`` and its dict-block cache, on rank 0 about 1 µs a call.

The caller's thread does O(1) work per call: check the step, look up the tag's id
(``_tags``), convert the value with ``float()``, and append a packed 24-byte record to
the points buffer that the writer thread drains (``_writer``). A dict whose key set was
seen before, with plain numbers as values, is packed in one call (a cached
``F.block_packer`` in ``_blocks``; the writer thread splits it into records). A tensor
on a device is never converted here (that would wait for the device): its copy and an
event go to the writer's ``pending`` list instead (``_device``). Everything that is
not a plain good point leaves for a slower method (``_to_float``, ``_add_dict``,
``_check_step``, ``_settle``) so the common case is a few attribute reads, a dict
lookup and one ``pack``: keep the local aliases and the ``__class__ is`` tests.

Also here: the ``add_scalar`` of a rank that does not log scalars (only the step is
kept, for its timers), timer points and text held until the session knows a step
(``_defer``), and the system sampler's points (``_log_system``).
"""

from __future__ import annotations

import time

from .._errors import StrictModeError
from ..format import _format as F
from ._checks import STEP_END as _STEP_END
from ._device import DEVICE_TENSOR as _DEVICE_TENSOR
from ._device import capture as _capture
from ._device import kind as _tensor_kind
from ._tags import Tags

TYPE_CHECKING = False  # typing is not imported: `import nblog` stays light
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

_mono_ns = time.monotonic_ns
_pack = F.POINT.pack
_PLAIN = frozenset((float, int, bool))  # values a dict block packs as they are
_MAX_BLOCKS = 64  # key sets cached for the block path; more go point by point


class Scalars(Tags):
    """``add_scalar`` of :class:`nblog.Run` (see the module docstring)."""

    # Run's, read here
    _t0: int  # monotonic_ns at the session's start: points carry ms since then
    _texts: list  # add_text's buffer (deferred text goes there)
    device_syncs: int

    if TYPE_CHECKING:
        def _ensure_writer(self) -> bool: ...

    def _init_scalars(self) -> None:
        self._points = bytearray()  # packed records for the writer, which drains it
        # dict key tuple -> [packer, last step, tag ids]: add_scalar's block path (one
        # pack per dict, split by the writer thread); None: this key set goes point by point
        self._blocks: dict[tuple, list | None] = {}
        self._deferred: list = []  # timer points and text waiting for the session's first step (_defer)

    def add_scalar(self, tag: str | Mapping[str, object], value: object = None, step: int | None = None,
                   all_ranks: bool | None = None) -> None:
        """Log one scalar, or a dict of them, at ``step``. Rank 0 only by default; never raises.

        Two forms: ``add_scalar("train/loss", 0.5, step=10)`` (as
        torch.utils.tensorboard's ``SummaryWriter.add_scalar``) and
        ``add_scalar({"train/loss": 0.5, "lr": 1e-3}, step=10)``.

        Args:
            tag: a non-empty ``str`` without NUL, at most 1024 characters, kept byte
                for byte (``/`` groups tags in viewers); or a dict of tag → value.
            value: int, float, bool, numpy scalar, 0-d array or tensor, or anything with
                ``__float__``. NaN and ±inf are kept exactly. A one-element tensor on a
                device (CUDA or any non-CPU device) is not waited for: a copy is queued
                in stream order and the writer thread converts it once the device has
                run it (the value is the one at the call; ``nblog.write._device``).
            step: a non-negative int; None uses the run's own counter, which each call
                without a step advances by one. It starts at 0 in a new run and after
                the run's last step in a resumed session (on every rank).
            all_ranks: True logs on every rank, each into its own event log, with no
                communication between ranks (read back with ``RunReader.scalars(rank=K)``
                or ``all_ranks=True``, ``nb tail --rank K``), so viewers can draw the
                band across ranks; ``init(scalars_all_ranks=True)`` makes it the default.
                None follows ``init(scalars_all_ranks=...)`` (default: only rank 0
                logs), False is rank 0 only in any case. The run summary in
                ``run.json`` is always rank 0's.

        A bad tag, value or step is skipped with one warning per (call site, tag) and
        counted in the session; with ``NB_STRICT=1`` it raises ``StrictModeError``.
        A step below the tag's highest step in this session is stored and warned
        once per tag (strict: raises); restarting from a checkpoint belongs in a new
        session (``init(resume="auto")``). On other ranks, without ``all_ranks``, this
        returns at once.
        """
        try:
            if step is None:
                step = self._counter
                self._counter = step + 1
            elif step.__class__ is not int or not 0 <= step < _STEP_END:
                # refused here, before anything keeps it: a step past int64 must not
                # become the current step, a tag's highest step or run.json's last step
                step = self._check_step(step, tag)
                if step is None:
                    return
            if tag.__class__ is str:
                if step < self._top:  # behind a step logged before: make the tags' highs exact
                    self._settle()
                else:
                    self._top = step
                tid = self._tids.get(tag)
                if tid is None:
                    tid = self._intern(self._tids, tag, F.KIND_SCALAR)
                    if tid is None:
                        self._step = step
                        return
                if value.__class__ is not float:
                    value = self._to_float(value, tag)
                    if value.__class__ is not float:  # refused (None), or a device value captured
                        if value is not None:
                            # not float, not None: the (copy, event) of a device value
                            self._add_captured(tag, tid, step, value,  # type: ignore[arg-type]
                                               (_mono_ns() - self._t0) // 1_000_000 & 0xFFFFFFFF)
                        self._step = step
                        return
                hi = self._hi
                if step < hi[tid]:
                    self._step_back(tag, step, hi[tid])
                else:
                    hi[tid] = step
                self._points += _pack(
                    step, value, tid, (_mono_ns() - self._t0) // 1_000_000 & 0xFFFFFFFF
                )
                self._step = step
            elif tag.__class__ is dict or isinstance(tag, dict):
                block = self._blocks.get(tuple(tag))
                if block is not None and step >= self._top:
                    # a key set seen before, at or past every step logged: one pack;
                    # sum() in C tells that every value is a float, int or bool
                    values = tag.values()
                    try:
                        if sum(values, 0.0).__class__ is float:
                            self._points += block[0](
                                step, (_mono_ns() - self._t0) // 1_000_000 & 0xFFFFFFFF, *values
                            )
                            block[1] = self._top = self._step = step
                            return
                        # numbers of another kind now (a tensor, a numpy float): this
                        # key set goes point by point from now on
                        self._blocks[tuple(tag)] = None
                    except Exception:  # a bad value (None, a str, an int too large): this call only
                        pass
                self._add_dict(tag, step)
                self._step = step
            else:
                if step < self._top:
                    self._settle()
                self._step = step
                self._reject("bad_tag", tag, f"tag must be a str or a dict, got {type(tag).__name__}")
        except StrictModeError:
            raise
        except Exception as err:
            self._internal(err)

    def _add_dict(self, values: dict, step: int) -> None:
        """The dict form point by point: each tag and value checked, each tag's step
        compared with its highest. A key set whose tags and values were all good
        (plain numbers) is cached as a block packer for the calls that follow."""
        if step < self._top:
            self._settle()
        else:
            self._top = step
        ms = (_mono_ns() - self._t0) // 1_000_000 & 0xFFFFFFFF
        out = bytearray()
        tids = self._tids
        hi = self._hi
        good: list[int] | None = [] if len(self._blocks) < _MAX_BLOCKS else None
        for tag, value in values.items():
            tid = tids.get(tag) if tag.__class__ is str else None
            if tid is None:
                tid = self._intern(tids, tag, F.KIND_SCALAR)
                if tid is None:
                    good = None
                    continue
            if good is not None:
                if value.__class__ in _PLAIN:
                    good.append(tid)
                else:
                    good = None
            if value.__class__ is not float:
                value = self._to_float(value, tag)
                if value.__class__ is not float:  # refused (None), or a device value captured
                    if value is not None:
                        self._add_captured(tag, tid, step, value, ms)  # type: ignore[arg-type]  # (copy, event)
                    continue
            if step < hi[tid]:
                self._step_back(tag, step, hi[tid])
            else:
                hi[tid] = step
            out += _pack(step, value, tid, ms)
        self._points += out
        keys = tuple(values)
        if good and len(good) == len(values) and keys not in self._blocks:
            try:
                packer = F.block_packer(tuple(good))
            except Exception as err:
                packer = None
                self._internal(err)
            if packer is not None:
                self._blocks[keys] = [packer, step, tuple(good)]

    def _settle(self) -> None:
        """Make each tag's highest step (``_hi``) exact: the block path of add_scalar
        keeps only its key set's last step. Called when a step is below one logged
        before (``_top``), so that the per-tag comparison that follows is exact."""
        hi = self._hi
        for block in list(self._blocks.values()):
            if block is not None:
                step = block[1]
                for tid in block[2]:
                    if hi[tid] < step:
                        hi[tid] = step

    def _remember_step(self, tag: Any = None, value: object = None,
                       step: int | None = None, all_ranks: bool | None = None) -> None:
        """add_scalar on a rank that does not log scalars but times: keep the step;
        with ``all_ranks=True``, log on this rank as rank 0 does (creating its writer)."""
        if all_ranks:
            if self._writer is not None or self._ensure_writer():
                return Scalars.add_scalar(self, tag, value, step)
        if step is None:
            step = self._counter
            self._counter = step + 1
        self._step = step

    def _add_scalar_unless_opted_out(self, tag: str | Mapping[str, object], value: object = None,
                                     step: int | None = None, all_ranks: bool | None = None) -> None:
        """add_scalar on a non-zero rank of an ``init(scalars_all_ranks=True)`` run: logs,
        unless the call says ``all_ranks=False`` (then only the step is kept)."""
        if all_ranks is False:
            return self._remember_step(tag, value, step)
        return Scalars.add_scalar(self, tag, value, step)

    def _to_float(self, value: Any, tag: object) -> float | tuple | None:
        cls = value.__class__
        if cls is int or cls is bool:
            try:
                return float(value)
            except OverflowError:
                self._reject("bad_value", tag, f"value {value!r} is too large for a float")
                return None
        if value is None or isinstance(value, (str, bytes, bytearray)):
            self._reject("bad_value", tag, f"value must be a number, got {type(value).__name__}")
            return None
        where = _tensor_kind(value)
        synced = False  # a device value converted here, waiting for the device
        if where:
            if where == _DEVICE_TENSOR and self._writer is not None and (self._logged or self._first_logged()):
                captured = _capture(value)  # (copy, event): no wait for the device here
                if captured is not None:
                    return captured
                synced = True
            try:
                if getattr(value, "requires_grad", False) is True:  # float() of it warns (torch 2.13)
                    value = value.detach()  # the same value
            except Exception:
                pass  # no detach: float() below converts it, or refuses it with a warning
        try:
            out = float(value)
        except Exception as err:
            self._reject("bad_value", tag, f"value of type {type(value).__name__} is not a number: {err}")
            return None
        if synced:
            self.device_syncs += 1
            self._warn_once(("device_sync",), f"nblog: a {type(value).__name__} on a device could not be copied "
                            "without waiting for it, so it was converted in the training thread (a device "
                            "sync); run.device_syncs counts such values")
        return out

    def _add_captured(self, tag: object, tid: int, step: int, captured: tuple, ms: int) -> None:
        """A device value captured by ``_device.capture``: queued for the writer thread,
        which converts it once its event has completed (``Writer.pending``), keeping its
        step and time."""
        hi = self._hi
        if step < hi[tid]:
            self._step_back(tag, step, hi[tid])
        else:
            hi[tid] = step
        writer = self._writer
        assert writer is not None  # _to_float captures only for a run with a writer
        writer.pending.append((step, tid, ms, captured[0], captured[1]))

    def _defer(self, item: tuple) -> None:
        """Hold a timer point or text logged before this session knows a step.

        They are written at the first step that add_scalar (or, on a rank that only
        times, the remembered step) makes known, or at finish. add_scalar is wrapped
        only while something waits, so the hot path pays nothing otherwise.
        """
        self._deferred.append(item)
        if len(self._deferred) > 1:  # the wrapper is already in place
            return
        inner = self.add_scalar
        own = "add_scalar" in self.__dict__  # a no-op or step-remembering binding

        def add_scalar(tag: str | Mapping[str, object], value: object = None, step: int | None = None,
                       all_ranks: bool | None = None) -> None:
            inner(tag, value, step, all_ranks)
            if self._step is not None:
                self._emit_deferred(self._step)
                if self.__dict__.get("add_scalar") is add_scalar:
                    if own:
                        self.add_scalar = inner
                    else:
                        del self.add_scalar

        add_scalar.__doc__ = Scalars.add_scalar.__doc__
        self.add_scalar = add_scalar

    def _emit_deferred(self, step: int) -> None:
        items, self._deferred = self._deferred, []
        points = bytearray()
        for item in items:
            if item[0] == "point":
                _kind, tid, value, ms = item
                points += _pack(step, value, tid, ms)
            else:
                _kind, tid, ms, text = item
                self._texts.append((step, tid, ms, text))
        self._points += points

    def _log_system(self, values: dict[str, float], wall: float | None = None) -> None:
        """Log system metrics (tag → value) at the current step. Used by the sampler."""
        if self._writer is None and not self._ensure_writer():
            return
        ms = (_mono_ns() - self._t0) // 1_000_000 & 0xFFFFFFFF
        out = bytearray()
        step = self._step if self._step is not None else self._counter
        for tag, value in values.items():
            tid = self._system_tids.get(tag)
            if tid is None:
                tid = self._intern(self._system_tids, tag, F.KIND_SYSTEM)
                if tid is None:
                    continue
            out += _pack(step, float(value), tid, ms)
        self._points += out
