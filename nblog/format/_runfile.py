"""``run.json``: written only by rank 0, always atomically (temp file + rename).

Also the config normaliser (anything a user passes as ``config=`` becomes JSON) and
the session numbering of event logs. The names of a run folder's files: ``_filenames``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Mapping
from stat import S_ISREG

from ._filenames import RUN_JSON, event_file_name, parse_event_file_name
from ._filesafety import write_atomic

TYPE_CHECKING = False  # typing is not imported: `import nblog` stays light
if TYPE_CHECKING:
    from typing import Any, BinaryIO

_O_READ = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)

# Sleeps between re-reads of a run.json that exists but does not parse: a network
# file system's cached size of a replaced file can cut a read short, and a re-open
# reads it whole (about 0.4 s in all before giving up).
RETRY_DELAYS = (0.02, 0.05, 0.1, 0.2)


def next_session(run_dir: str, rank: int, at_least: int = 0) -> int:
    """The first session number of ``rank`` after every event log already in ``run_dir``.

    Rank 0 lists the folder. Another rank (thousands of them at once, in a folder of
    thousands of logs) only looks its own names up, from ``at_least`` (rank 0's latest
    session) on: that finds the same number, since each of its sessions was the larger
    of its previous one + 1 and rank 0's latest then, so those at or above
    ``at_least`` follow each other without a gap.
    """
    n = at_least
    if rank == 0:
        try:
            names = os.listdir(run_dir)
        except OSError:
            return n
        for name in names:
            rs = parse_event_file_name(name)
            if rs and rs[0] == rank:
                n = max(n, rs[1] + 1)
    # A network file system may list the folder from a cache that does not show the
    # newest sessions yet; a lookup of the name itself is not served from that cache.
    while os.path.lexists(os.path.join(run_dir, event_file_name(rank, n))):
        n += 1
    return n


def to_json_config(config: Any) -> dict:
    """Normalise ``config`` into a JSON-able dict.

    Accepts a mapping, a dataclass instance, an ``argparse.Namespace``, an object with
    ``to_dict()``, or an OmegaConf container. Values that are not JSON-able are stored
    as their ``repr`` (``"<T object: repr() failed>"`` when that raises); reference
    cycles become the string ``"<cycle>"``, values nested deeper than 100 levels
    ``"<nested too deep>"``.

    Raises:
        TypeError: ``config`` is none of the accepted kinds.
    """
    if config is None:
        return {}
    if type(config).__module__.startswith("omegaconf"):
        # the user's own library, loaded with its object (format imports the standard library only)
        config = sys.modules["omegaconf"].OmegaConf.to_container(config, resolve=True)
    elif _is_dataclass_instance(config):
        config = _dataclass_dict(config)
    elif "argparse" in sys.modules and isinstance(config, sys.modules["argparse"].Namespace):
        config = vars(config)
    elif not isinstance(config, Mapping) and callable(getattr(config, "to_dict", None)):
        config = config.to_dict()
    if not isinstance(config, Mapping):
        raise TypeError(
            "config must be a mapping, dataclass, argparse.Namespace, an object with "
            f"to_dict() or an OmegaConf container, got {type(config).__name__}"
        )
    return _jsonable(config, set())  # type: ignore[return-value]  # a Mapping gives a dict


def _is_dataclass_instance(obj: object) -> bool:
    # dataclasses is not imported unless the object is one (import nblog stays light)
    return hasattr(type(obj), "__dataclass_fields__") and not isinstance(obj, type)


def _dataclass_dict(obj: Any) -> dict:
    import dataclasses

    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


_MAX_DEPTH = 100  # config nesting kept; deeper values become "<nested too deep>"


def _jsonable(obj: object, seen: set[int], depth: int = 0) -> object:
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else repr(obj)
    if id(obj) in seen:
        return "<cycle>"
    if depth >= _MAX_DEPTH:
        return "<nested too deep>"
    try:
        if isinstance(obj, Mapping):
            seen.add(id(obj))
            try:
                return {str(k): _jsonable(v, seen, depth + 1) for k, v in obj.items()}
            finally:
                seen.discard(id(obj))
        if isinstance(obj, (list, tuple)):
            seen.add(id(obj))
            try:
                return [_jsonable(v, seen, depth + 1) for v in obj]
            finally:
                seen.discard(id(obj))
        if _is_dataclass_instance(obj):
            return _jsonable(_dataclass_dict(obj), seen, depth + 1)
    except Exception:  # a container that cannot be walked (items() raising...): kept as its repr
        pass
    try:
        return repr(obj)
    except Exception:
        return f"<{type(obj).__name__} object: repr() failed>"


def write_json_atomic(path: str, data: dict) -> None:
    """Write ``data`` as JSON to ``path`` atomically (``_filesafety.write_atomic``): the
    JSON of run.json, its backup, provenance files and failure marks (one space of
    indent, no NaN, values that are not JSON as their ``repr``).

    Raises:
        OSError: as ``write_atomic``; ValueError: a float that is not finite in ``data``.
    """
    text = json.dumps(data, indent=1, allow_nan=False, default=repr) + "\n"
    write_atomic(path, text.encode("utf-8"))


def read_json_file(path: str) -> tuple[dict | None, os.stat_result | None]:
    """``(parsed object or None, stat of the file or None)`` of a JSON file, in four
    system calls (open, fstat, read, close): the stat comes from the open file, so
    listing a run needs no separate stat of its run.json. A FIFO or device under that
    name is never read (opened non-blocking, and only regular files are read)."""
    try:
        fd = os.open(path, _O_READ)
    except OSError:
        return None, None
    st = None
    try:
        st = os.fstat(fd)
        if not S_ISREG(st.st_mode):
            return None, st
        data = os.read(fd, st.st_size + 1)
        if len(data) != st.st_size:  # changed since the fstat (run.json is replaced, never
            parts = [data]  # rewritten in place, so only a hostile file gets here): read it all
            while chunk := os.read(fd, 1 << 20):
                parts.append(chunk)
            data = b"".join(parts)
    except OSError:
        return None, st
    finally:
        os.close(fd)
    try:
        obj = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):  # bad UTF-8 or JSON, or nesting too deep (hostile)
        return None, st
    return (obj if isinstance(obj, dict) else None), st


def open_regular(path: str) -> BinaryIO:
    """Open ``path`` for reading bytes (a binary file object) without ever blocking:
    opened non-blocking, and ``OSError`` (``ENODEV``) when it is not a regular file,
    so a FIFO or device placed under a run's file name never hangs a reader.

    Raises:
        OSError: as ``open`` does (``FileNotFoundError``, ``PermissionError``, ...),
            and when the path is not a regular file.
    """
    fd = os.open(path, _O_READ)
    try:
        if not S_ISREG(os.fstat(fd).st_mode):
            raise OSError(19, "not a regular file", path)  # ENODEV
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_run_json(run_dir: str) -> dict | None:
    """Return the parsed ``run.json`` of ``run_dir``, or None if missing, unreadable,
    not a regular file (a FIFO there never blocks the reader) or not a JSON object."""
    return read_json_file(os.path.join(run_dir, RUN_JSON))[0]


def read_run_json_retrying(run_dir: str, delays: tuple[float, ...] = RETRY_DELAYS) -> tuple[dict | None, str]:
    """``(parsed run.json, state)`` of ``run_dir``: state ``"ok"``, ``"missing"`` (no
    file under that name: not retried) or ``"unreadable"`` (it exists, but no read
    parsed as a JSON object). A read that does not parse is retried by opening the
    file again, after each sleep of ``delays`` (seconds): on a network file system a
    cached size of a replaced run.json cuts a read short, and a new open reads it whole.
    """
    path = os.path.join(run_dir, RUN_JSON)
    for i in range(len(delays) + 1):
        obj, st = read_json_file(path)
        if obj is not None:
            return obj, "ok"
        if st is None and not os.path.lexists(path):
            return None, "missing"
        if i < len(delays):
            time.sleep(delays[i])
    return None, "unreadable"


class RunFile:
    """Rank 0's in-memory ``run.json``; every update rewrites the file atomically.

    Thread-safe: the writer thread records the first step while the main thread may
    be finishing.
    """

    def __init__(self, run_dir: str, data: dict):
        self.path = os.path.join(run_dir, RUN_JSON)
        self.data = data
        self._lock = threading.Lock()

    def save(self) -> None:
        with self._lock:
            write_json_atomic(self.path, self.data)

    def update_session(self, session: int, **changes: object) -> None:
        """Set fields of session ``session`` (and the top-level ``status`` and
        ``summary`` if given)."""
        with self._lock:
            status = changes.pop("status", None)
            if status is not None:
                self.data["status"] = status
            summary = changes.pop("summary", None)
            if summary is not None:
                self.data["summary"] = summary
            for s in self.data.get("sessions", []):
                if s.get("session") == session:
                    s.update(changes)
            write_json_atomic(self.path, self.data)
