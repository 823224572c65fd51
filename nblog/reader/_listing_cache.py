"""What ``nb ls`` learnt of each run, kept between runs of it (issue 18: 20,000 runs in
at most a second).

Listing a run costs a directory listing, an open and read of its ``run.json`` and a
JSON parse; on 20,000 runs that is most of two seconds. This cache keeps, per run
folder, the names of its event logs and media packs (valid while the folder's
modification time is unchanged: creating, removing or renaming a file in it changes
that) and the parts of ``run.json`` that listing uses (:data:`META_KEYS`, and for a
query :data:`QUERY_KEYS` in a second file; valid while the file's inode,
size and modification time are unchanged: nblog replaces run.json by a rename, so
every write gives a new inode). A run listed from the cache costs a ``stat`` of its
folder, of its run.json and of each event log (sizes and modification times are
always taken afresh), and no read.

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

VERSION = 1
MIN_RUNS = 500  # smaller roots list fast enough without one (and tests leave no files behind)
SETTLE_S = 2.0
#: The run.json keys that listing uses (kept in the cache), and of each session those
#: that its status, duration, last step and failure come from.
META_KEYS = ("name", "status", "sessions", "created", "world_size")
SESSION_KEYS = ("session", "start", "end", "duration_s", "updated", "last_step", "failure")
#: Also kept for a query (``nb ls --where``), in a cache file of its own.
QUERY_KEYS = ("config", "summary")


def cache_dir(env: Mapping[str, str] | None = None) -> str | None:
    """The cache folder, or None when ``NB_CACHE_DIR`` is set empty (no cache)."""
    env = os.environ if env is None else env
    if "NB_CACHE_DIR" in env:
        return env["NB_CACHE_DIR"] or None
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "nb")


class ListingCache:
    """The cache of one root: :meth:`names` and :meth:`meta` answer from it when the
    stamps match; :meth:`save` writes what was learnt. ``query``: keep the config and
    tag summaries too (for ``nb ls --where``; a file of its own, so that a plain
    listing does not parse every run's config). Not thread-safe."""

    def __init__(self, root: str, query: bool = False, env: Mapping[str, str] | None = None):
        self.root = root
        self.keys = META_KEYS + QUERY_KEYS if query else META_KEYS
        folder = cache_dir(env)
        name = ("query-" if query else "ls-") + hashlib.sha256(os.fsencode(root)).hexdigest()[:24] + ".json"
        self.path = None if folder is None else os.path.join(folder, name)
        self._old: dict = self._load()
        self._new: dict = {}
        self._changed = False
        self._now = time.time()

    def _load(self) -> dict:
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

    def _entry(self, run_dir: str) -> dict:
        e = self._new.get(run_dir)
        if e is None:
            old = self._old.get(run_dir)
            e = self._new[run_dir] = old if isinstance(old, dict) else {}
        return e

    def names(self, run_dir: str) -> list[str] | None:
        """The folder's relevant file names when its modification time is the cached one
        (one ``stat``), else None: the caller lists it and calls :meth:`put_names`."""
        try:
            st = os.stat(run_dir)
        except OSError:
            return None
        e = self._entry(run_dir)
        names = e.get("names")
        if e.get("dir") == st.st_mtime_ns and isinstance(names, list):
            return names
        e["dir_seen"] = st.st_mtime_ns
        return None

    def put_names(self, run_dir: str, names: list[str]) -> None:
        e = self._entry(run_dir)
        stamp = e.pop("dir_seen", None)
        if stamp is not None and stamp / 1e9 < self._now - SETTLE_S:
            e["dir"], e["names"] = stamp, names
            self._changed = True
        else:
            e.pop("dir", None)
            e.pop("names", None)

    def meta(self, path: str, run_dir: str) -> tuple[dict, os.stat_result] | None:
        """run.json's listing keys and its stat when its stamp is the cached one, else None."""
        try:
            st = os.stat(path)
        except OSError:
            return None
        e = self._entry(run_dir)
        meta = e.get("meta")
        if e.get("json") == [st.st_ino, st.st_size, st.st_mtime_ns] and isinstance(meta, dict):
            return meta, st
        return None

    def put_meta(self, run_dir: str, meta: dict, st: os.stat_result | None) -> dict:
        """Keep ``meta``'s listing keys for the file whose stat is ``st``; returns them."""
        kept = {k: meta[k] for k in self.keys if k in meta}
        sessions = kept.get("sessions")
        if isinstance(sessions, list):
            kept["sessions"] = [{k: v for k, v in x.items() if k in SESSION_KEYS} if isinstance(x, dict) else x
                                for x in sessions]
        e = self._entry(run_dir)
        if st is not None and st.st_mtime < self._now - SETTLE_S:
            e["json"], e["meta"] = [st.st_ino, st.st_size, st.st_mtime_ns], kept
            self._changed = True
        else:
            e.pop("json", None)
            e.pop("meta", None)
        return kept

    def save(self, complete: bool) -> None:
        """Write the cache when something changed and the root has at least
        :data:`MIN_RUNS` runs. ``complete``: every run of the root was listed (entries
        not seen are dropped); else the entries not seen are kept."""
        if self.path is None:
            return
        runs = self._new if complete else {**self._old, **self._new}
        if len(runs) < MIN_RUNS or not (self._changed or (complete and len(self._old) != len(self._new))):
            return
        import tempfile  # only when writing: nb ls starts without it

        folder = os.path.dirname(self.path)
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".ls-", dir=folder)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    json.dump({"version": VERSION, "root": self.root, "runs": runs}, f, separators=(",", ":"))
                os.replace(tmp, self.path)
            except BaseException:
                os.unlink(tmp)
                raise
        except (OSError, TypeError, ValueError):
            pass  # a cache that cannot be written is no cache: listing stays right, only slower
