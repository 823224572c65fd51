"""Scalars that live on a device (a CUDA tensor, or any non-CPU tensor), logged without a sync.

``float()`` of a CUDA tensor waits until the device has run every kernel queued before
it: logging the loss every step that way stalls the training pipeline once a step.
Instead, the caller's thread only queues work in stream order and returns:

- CUDA: a non-blocking copy into a fresh pinned host tensor, then an event recorded on
  the tensor's device's current stream (the stream the copy runs on). Once the event
  has completed, the host tensor holds the value; reading it touches no device.
- another device (``xpu``, ``mps``, ...): a device-side clone and an event
  (``Event(device)``, recorded on the device's current stream); the writer thread
  converts the clone with ``float()`` once the event has completed (a copy there, in
  the writer thread, which may wait for the device).

Either way the value is the one at the call: an in-place update of the same tensor
later in the stream does not change the copy. The writer thread polls
``event.query()`` and converts (``_writer.Writer.pending``).

Nothing here imports torch: the tensor's own library is the module its class comes
from (``torch`` for ``torch.Tensor`` and ``torch.nn.Parameter``), already imported
since one of its tensors exists. Anything that does not look like such a tensor, a
tensor of more than one element, or a capture that fails (a CUDA graph being
captured, an odd object) returns None: the caller then uses ``float()`` as for any
value, with its usual warning if that fails.
"""

from __future__ import annotations

import sys
from typing import Any

NOT_TENSOR, CPU_TENSOR, DEVICE_TENSOR = 0, 1, 2
# class -> how to tell where its values are: 1 ``is_cpu`` (torch), 2 ``device.type``, 0 not a tensor
_CLASSES: dict[type, int] = {}
_MAX_CLASSES = 512  # classes remembered; others are looked at each time


def kind(value: Any) -> int:
    """Whether ``value`` is a tensor, and where: ``NOT_TENSOR``, ``CPU_TENSOR`` or
    ``DEVICE_TENSOR`` (on a non-CPU device: ``is_cpu`` False, or ``device.type`` not
    ``"cpu"``).

    A tensor is an object whose class has an ``is_cpu`` attribute (torch's tensors) or
    a ``device`` attribute with a ``type`` (NumPy's ``device`` is the string "cpu": not
    a tensor here, ``float()`` is right for it). Cheap: a dict look-up per call, one
    attribute more for a tensor (~0.1 µs). Never raises.
    """
    cls = value.__class__
    how = _CLASSES.get(cls)
    if how is None:
        how = 1 if hasattr(cls, "is_cpu") else 2 if hasattr(cls, "device") else 0
        if len(_CLASSES) < _MAX_CLASSES:
            _CLASSES[cls] = how
    if not how:
        return NOT_TENSOR
    try:
        if how == 1:
            cpu = value.is_cpu
            if cpu.__class__ is bool:
                return CPU_TENSOR if cpu else DEVICE_TENSOR
        device = value.device
        if device.__class__ is str:  # NumPy: "cpu"; its class is no tensor from now on
            _CLASSES[cls] = 0
            return NOT_TENSOR
        where = getattr(device, "type", None)
        if where.__class__ is not str:
            return NOT_TENSOR
        return CPU_TENSOR if where == "cpu" else DEVICE_TENSOR
    except Exception:  # a device that cannot be read: float() converts it, or refuses it with a warning
        return NOT_TENSOR


def capture(value: Any) -> tuple[Any, Any] | None:
    """Queue a copy of a one-element device tensor and an event after it, without waiting.

    Args:
        value: a tensor on a non-CPU device (``DEVICE_TENSOR``, see :func:`kind`).

    Returns:
        ``(copy, event)``: ``float(copy)`` is the value once ``event.query()`` is True
        (see :func:`resolve`); or None when ``value`` cannot be captured this way (the
        caller falls back to ``float(value)``). Never raises.
    """
    try:
        lib = sys.modules.get(value.__class__.__module__.partition(".")[0])
        if lib is None or value.numel() != 1:  # float() says what is wrong with it
            return None
        device = value.device
        src = value.detach()  # the copy must not join (and keep alive) the autograd graph
        if device.type == "cuda":
            cuda = lib.cuda
            if cuda.is_current_stream_capturing():  # a CUDA graph: nothing runs now
                return None
            copy = lib.empty(src.shape, dtype=src.dtype, device="cpu", pin_memory=True)
            copy.copy_(src, non_blocking=True)
            event = cuda.Event()
            event.record(cuda.current_stream(device))
        else:
            copy = src.clone()
            event = lib.Event(device)
            event.record()
        return copy, event
    except Exception:  # the caller converts it with float() instead, counted and warned once
        return None


def resolve(copy: Any, event: Any) -> float | None:
    """The captured value as a float, or None while ``event`` has not completed.

    Called in the writer thread. Raises what ``event.query()`` or ``float(copy)``
    raise (a device error, a complex tensor): the caller counts and warns.
    """
    if not event.query():
        return None
    return float(copy)
