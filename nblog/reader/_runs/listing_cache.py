"""What ``nb ls`` learnt of each run, kept between runs of it (issue 18: 20,000 runs in
at most a second).

Listing a run costs a directory listing, an open and read of its ``run.json`` and a
JSON parse; on 20,000 runs that is most of two seconds. This cache keeps, per run
folder, the names of its event logs and media packs (valid while the folder's
modification time is unchanged: creating, removing or renaming a file in it changes
that) and what listing derives from ``run.json`` (:data:`INFO`, made by
:func:`nblog.reader._runs.catalog.run_info`; for a query also its ``config`` and ``summary``,
in a second file; valid while the file's inode, size and modification time are
unchanged: nblog replaces run.json by a rename, so every write gives a new inode). A
run listed from the cache costs a ``stat`` of its folder and of each event log (sizes
and modification times are always taken afresh), and no read; run.json is stat'ed only
when the folder changed (nblog replaces it by a rename, which changes the folder, so
an unchanged folder holds the run.json that was read).

Each run is one small JSON array (no key names repeated 20,000 times, and no session
list: only what the row is made of), so that loading the cache of 20,000 runs is a
fraction of the listing. Where listing reads the end of rank 0's event log (a session
run.json may be behind: :func:`nblog.reader._runs.catalog._last_step`), the step found is kept
by the log's name, size and modification time, so a killed run's log is read once. ``nb resume-id --latest``
(:func:`nblog.reader._runs.catalog.latest_run`) uses the same file, stat'ing only each
run.json.

The cache is a JSON file per root in ``$NB_CACHE_DIR`` (default
``$XDG_CACHE_HOME/nb``, else ``~/.cache/nb``), written (a temp file, then a rename)
only for a root of at least :data:`MIN_RUNS` runs and only when something changed;
``NB_CACHE_DIR=`` (empty) turns it off. Entries whose folder or run.json changed in
the last :data:`SETTLE_S` seconds are not stored (a change within the same clock tick
would not show). A cache that is missing, unreadable or of another version is
ignored; nothing in it is ever executed.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping

from ...format._filesafety import write_atomic

VERSION = 3  # 1: a dict per run; 2: no writer, step session or log steps (ignored now: listed afresh once)
MIN_RUNS = 500  # smaller roots list fast enough without one (and tests leave no files behind)
SETTLE_S = 2.0
#: What listing keeps of a run.json, in this order (one array per run): see
#: :func:`nblog.reader._runs.catalog.run_info`.
INFO = ("name", "created", "world_size", "sessions", "status", "closed_s", "open_start", "last_step",
        "last_step_updated", "failure", "last_session", "step_session", "step_ended", "writer")
#: Also kept for a query (``nb ls --where``), in a cache file of its own.
QUERY_KEYS = ("config", "summary")
# an entry: [folder mtime_ns, names, run.json inode, size, mtime_ns, info, query extra, mtime (s),
# {event log name: [size, mtime_ns, last step]}]
_DIR, _NAMES, _INO, _SIZE, _MTIME, _INFO, _EXTRA, _MTIME_S, _LOGS = range(9)
_LEN = 9


def cache_dir(env: Mapping[str, str] | None = None) -> str | None:
    """The cache folder, or None when ``NB_CACHE_DIR`` is set empty (no cache)."""
    env = os.environ if env is None else env
    if "NB_CACHE_DIR" in env:
        return env["NB_CACHE_DIR"] or None
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "nb")


def cache_path(root: str, query: bool = False, env: Mapping[str, str] | None = None) -> str | None:
    """The cache file of the absolute ``root`` (``query``: the one with configs), or
    None when caching is off."""
    folder = cache_dir(env)
    if folder is None:
        return None
    name = ("query-" if query else "ls-") + hashlib.sha256(os.fsencode(root)).hexdigest()[:24] + ".json"
    return os.path.join(folder, name)


class ListingCache:
    """The cache of one absolute ``root``: :meth:`names` and :meth:`info` answer from it
    when the stamps match; :meth:`save` writes what was learnt. ``query``: keep the
    config and tag summaries too (for ``nb ls --where``; a file of its own, so that a
    plain listing does not parse every run's config). Not thread-safe."""

    def __init__(self, root: str, query: bool = False, env: Mapping[str, str] | None = None):
        self.root = root
        self.query = query
        self.path = cache_path(root, query, env)
        self._prefix = root.rstrip(os.sep) + os.sep
        self._old: dict[str, list] = self._load()
        self._new: dict[str, list] = {}
        self._seen: dict[str, int] = {}  # folder mtimes taken by names(), for put_names
        self._changed = False
        self._now = time.time()
        self._last_dir: str | None = None
        self._last: tuple[str, list] = ("", [])

    def _load(self) -> dict[str, list]:
        if self.path is None:
            return {}
        try:
            with open(self.path, "rb") as f:
                obj = json.loads(f.read())
        except (OSError, ValueError, RecursionError):
            return {}
        if not isinstance(obj, dict) or obj.get("version") != VERSION or obj.get("root") != self.root:
            return {}
        runs = obj.get("runs")
        return runs if isinstance(runs, dict) else {}

    def _key(self, run_dir: str) -> str:
        return run_dir[len(self._prefix):] if run_dir.startswith(self._prefix) else run_dir

    def _run(self, run_dir: str) -> tuple[str, list]:
        """The key and entry of ``run_dir`` (kept for the next call: names(), then
        info() or unchanged_info() ask for the same run)."""
        if run_dir is self._last_dir:
            return self._last
        self._last_dir = run_dir
        key = self._key(run_dir)
        self._last = key, self._entry(key)
        return self._last

    def _entry(self, key: str) -> list:
        e = self._new.get(key)
        if e is None:
            old = self._old.get(key)
            e = self._new[key] = old if isinstance(old, list) and len(old) == _LEN else [None] * _LEN
        return e

    def names(self, run_dir: str) -> list[str] | None:
        """The folder's relevant file names when its modification time is the cached one
        (one ``stat``), else None: the caller lists it and calls :meth:`put_names`."""
        try:
            mtime = os.stat(run_dir).st_mtime_ns
        except OSError:
            return None
        key, e = self._run(run_dir)
        names = e[_NAMES]
        if e[_DIR] == mtime and isinstance(names, list):
            return names
        self._seen[key] = mtime
        return None

    def put_names(self, run_dir: str, names: list[str]) -> None:
        """Keep ``names`` for the folder as :meth:`names` last saw it."""
        key, e = self._run(run_dir)
        stamp = self._seen.pop(key, None)
        if stamp is not None and stamp / 1e9 < self._now - SETTLE_S:
            e[_DIR], e[_NAMES] = stamp, names
            self._changed = True
        else:
            e[_DIR] = e[_NAMES] = None

    def unchanged_info(self, run_dir: str) -> tuple[list, dict | None, int, float] | None:
        """``(info, extra, size, mtime)`` of the folder's run.json, with no system call,
        right after :meth:`names` answered from the cache (the folder is unchanged, so
        run.json is the file that was read: nblog replaces it by a rename, which changes
        the folder); None when the cache has none (then :meth:`info`)."""
        e = self._run(run_dir)[1]
        info, size, mtime = e[_INFO], e[_SIZE], e[_MTIME_S]
        if not (isinstance(info, list) and len(info) == len(INFO) and isinstance(size, int)
                and isinstance(mtime, float) and isinstance(e[_DIR], int)):
            return None
        extra = e[_EXTRA]
        if not self.query:
            return info, None, size, mtime
        return (info, extra, size, mtime) if isinstance(extra, dict) else None

    def info(self, path: str, run_dir: str) -> tuple[list, dict | None, os.stat_result] | None:
        """``(info, extra, stat)`` of run.json at ``path`` when its stamp is the cached
        one: :data:`INFO` as a list, the query keys (a dict; None unless ``query``) and
        the file's stat; else None."""
        try:
            st = os.stat(path)
        except OSError:
            return None
        e = self._run(run_dir)[1]
        info = e[_INFO]
        if (e[_MTIME] == st.st_mtime_ns and e[_INO] == st.st_ino and e[_SIZE] == st.st_size
                and isinstance(info, list) and len(info) == len(INFO)):
            extra = e[_EXTRA]
            if not self.query:
                return info, None, st
            if isinstance(extra, dict):
                return info, extra, st
        return None

    def put_info(self, run_dir: str, info: list, extra: dict | None, st: os.stat_result | None) -> None:
        """Keep ``info`` (and ``extra``, for a query) for the run.json whose stat is ``st``."""
        e = self._run(run_dir)[1]
        if st is not None and st.st_mtime < self._now - SETTLE_S:
            e[_INO], e[_SIZE], e[_MTIME], e[_INFO] = st.st_ino, st.st_size, st.st_mtime_ns, info
            e[_EXTRA], e[_MTIME_S] = extra if self.query else None, st.st_mtime
            self._changed = True
        else:
            e[_INO] = e[_SIZE] = e[_MTIME] = e[_INFO] = e[_EXTRA] = e[_MTIME_S] = None

    def log_step(self, run_dir: str, name: str, st: os.stat_result) -> tuple[int | None] | None:
        """``(last step,)`` of the event log ``name`` of ``run_dir`` as read when it had
        the size and modification time of ``st`` (the step None: it held none); None
        when it was not read at that stamp."""
        e = self._run(run_dir)[1]
        logs = e[_LOGS]
        hit = logs.get(name) if isinstance(logs, dict) else None
        if isinstance(hit, list) and len(hit) == 3 and hit[0] == st.st_size and hit[1] == st.st_mtime_ns \
                and (hit[2] is None or hit[2].__class__ is int):
            return (hit[2],)
        return None

    def put_log_step(self, run_dir: str, name: str, st: os.stat_result, step: int | None) -> None:
        """Keep ``step``, the last step read from the event log ``name`` of ``run_dir``
        whose stat is ``st`` (not for a log changed in the last :data:`SETTLE_S` seconds:
        it is being written)."""
        e = self._run(run_dir)[1]
        logs = e[_LOGS] if isinstance(e[_LOGS], dict) else {}
        if st.st_mtime < self._now - SETTLE_S:
            logs[name] = [st.st_size, st.st_mtime_ns, step]
            self._changed = True
        else:
            logs.pop(name, None)
        e[_LOGS] = logs or None

    def save(self, complete: bool) -> None:
        """Write the cache when something changed and the root has at least
        :data:`MIN_RUNS` runs. ``complete``: every run of the root was listed (entries
        not seen are dropped); else the entries not seen are kept."""
        if self.path is None:
            return
        runs = self._new if complete else {**self._old, **self._new}
        if len(runs) < MIN_RUNS or not (self._changed or (complete and len(self._old) != len(self._new))):
            return
        try:
            text = json.dumps({"version": VERSION, "root": self.root, "runs": runs}, separators=(",", ":"))
            os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
            write_atomic(self.path, text.encode("utf-8"), mode=0o600)
        except (OSError, TypeError, ValueError):
            pass  # a cache that cannot be written is no cache: listing stays right, only slower
