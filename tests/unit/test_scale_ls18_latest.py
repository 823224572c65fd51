"""Issue 18 (a root of 20,000 runs): ``nb resume-id --latest`` finds the newest run
without reading event logs (:func:`nblog.reader.latest_run`), the same run that
``nb ls`` lists first, also when runs were added, resumed or removed since the listing
cache was written; the cache keeps only what a row is made of (version 2), and a cache
of an older version is never used."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nblog as nb
from nblog.reader import latest_run, list_runs
from nblog.reader._runs.listing_cache import INFO, MIN_RUNS

_LATEST = r"""
import json, os, sys
root = os.path.abspath(sys.argv[1])
opened = []

def hook(event, args):
    if event == "open" and args and isinstance(args[0], str) and os.path.abspath(args[0]).startswith(root + os.sep):
        opened.append(os.path.basename(args[0]))

sys.addaudithook(hook)
from nblog.reader import latest_run
rid = latest_run(root, "p", sys.argv[2] or None)
print(json.dumps([rid, opened]))
"""


def age(path: Path, seconds: float = 3600.0) -> None:
    then = time.time() - seconds
    for p in [*path.iterdir(), path]:
        os.utime(p, (then, then))


def set_meta(run: Path, **changes) -> None:
    """Change run.json as nblog does: a new file renamed over it."""
    meta = json.loads((run / "run.json").read_text())
    meta.update(changes)
    (run / "run.json.new").write_text(json.dumps(meta))
    os.replace(run / "run.json.new", run / "run.json")


def latest(root: Path, cache: Path, name: str | None = None) -> tuple[str | None, list[str]]:
    env = {**os.environ, "NB_CACHE_DIR": str(cache)}
    out = subprocess.run([sys.executable, "-c", _LATEST, str(root), name or ""], env=env, capture_output=True,
                         text=True, timeout=120, check=True)
    rid, opened = json.loads(out.stdout)
    return rid, opened


def build(root: Path) -> Path:
    """MIN_RUNS + 1 finished runs of project p (names a and b), started a second apart,
    dated an hour back; a folder with an event log but no run.json; one with a run.json
    that is not JSON; one that is no run."""
    seed = nb.init("p", run_id="seed-00000000", run_name="a", root=root, system=False, provenance=False,
                   _environ={})
    seed.add_scalar("loss", 1.0, step=0)
    seed.finish()
    p = root / "p"
    for i in range(MIN_RUNS):
        d = p / f"r{i:04d}-00000000"
        shutil.copytree(p / "seed-00000000", d)
        set_meta(d, created=1.9e9 + i, name="a" if i % 2 else "b")
    (p / "nojson-00000000").mkdir()
    shutil.copy(p / "seed-00000000" / "events.r0.s0.log", p / "nojson-00000000" / "events.r0.s0.log")
    shutil.copytree(p / "seed-00000000", p / "broken-00000000")
    (p / "broken-00000000" / "run.json").write_text("{not json")
    (p / "notarun").mkdir()
    for d in p.iterdir():
        age(d)
    return p


def test_latest_run_is_what_list_runs_lists_first_and_follows_changes(tmp_path):
    root, cache = tmp_path / "runs", tmp_path / "cache"
    p = build(root)
    os.environ["NB_CACHE_DIR"] = str(tmp_path / "in-process")  # list_runs below writes its own cache
    try:
        def check(name: str | None) -> str:
            rows = [r for r in list_runs(root, "p") if name is None or r["name"] == name]
            got, opened = latest(root, cache, name)
            assert got == rows[0]["id"]
            assert not [o for o in opened if o.startswith("events.")]  # no event log is read
            return got

        assert check(None) == "r0499-00000000" and check("b") == "r0498-00000000"
        # the cache written: no file opened but the run.json that is not JSON (nothing to keep of it)
        assert latest(root, cache, None)[1] == ["run.json"]
        # a newer run added
        shutil.copytree(p / "r0001-00000000", p / "new-00000000")
        set_meta(p / "new-00000000", created=1.95e9, name="b")
        assert check(None) == "new-00000000" and check("b") == "new-00000000" and check("a") == "r0499-00000000"
        # resumed under another name; then removed
        set_meta(p / "new-00000000", name="c")
        assert check("b") == "r0498-00000000" and check("c") == "new-00000000"
        shutil.rmtree(p / "new-00000000")
        assert check(None) == "r0499-00000000" and latest(root, cache, "c")[0] is None
        assert latest(root, cache, "zzz")[0] is None and latest_run(root, "nosuch") is None
    finally:
        del os.environ["NB_CACHE_DIR"]


def test_the_cache_keeps_a_row_and_ignores_an_older_version(tmp_path):
    root, cache = tmp_path / "runs", tmp_path / "cache"
    p = build(root)
    env = {**os.environ, "NB_CACHE_DIR": str(cache)}
    ls = [sys.executable, "-c", "from nbcli.app import main; main()", "ls", "--root", str(root), "--json"]
    first = json.loads(subprocess.run(ls, env=env, capture_output=True, text=True, timeout=120, check=True).stdout)
    path = cache / ("ls-" + hashlib.sha256(os.fsencode(str(root))).hexdigest()[:24] + ".json")
    stored = json.loads(path.read_text())
    entry = stored["runs"]["p/r0007-00000000"]
    assert len(entry[5]) == len(INFO) and "sessions" not in json.dumps(entry)  # no session list kept
    # a version-1 cache with matching stamps but another name is not used
    run = p / "r0007-00000000"
    st_dir, st_json = os.stat(run), os.stat(run / "run.json")
    v1 = {"version": 1, "root": str(root), "runs": {str(run): {
        "dir": st_dir.st_mtime_ns, "names": ["events.r0.s0.log", "run.json"],
        "json": [st_json.st_ino, st_json.st_size, st_json.st_mtime_ns],
        "meta": {"name": "from-an-old-cache", "status": "finished", "sessions": [], "created": 1.0}}}}
    path.write_text(json.dumps(v1))
    again = json.loads(subprocess.run(ls, env=env, capture_output=True, text=True, timeout=120, check=True).stdout)
    assert again == first


def test_listing_runs_no_garbage_collection_and_restores_it(tmp_path, monkeypatch):
    """Listing makes a small list or dict per value of every run, none in a cycle: the
    collector is paused meanwhile (it would scan them again and again), and restored."""
    import gc

    root = tmp_path / "runs"
    build(root)
    monkeypatch.setenv("NB_CACHE_DIR", str(tmp_path / "cache"))
    collections, inside = [], []

    def seen(phase, info):
        if phase == "start" and inside:
            collections.append(info["generation"])

    gc.callbacks.append(seen)
    try:
        for _ in range(2):  # the first listing writes the cache, the second reads it
            for call, want in ((lambda: len(list_runs(root)), MIN_RUNS + 3),
                               (lambda: latest_run(root, "p"), "r0499-00000000")):
                gc.collect()
                inside.append(1)
                got = call()
                inside.clear()
                assert got == want
                # none while listing; the one put off may run as the collector is turned back on
                assert len(collections) <= 1, collections
                collections.clear()
    finally:
        gc.callbacks.remove(seen)
    assert gc.isenabled()
    gc.disable()
    try:
        list_runs(root)
        assert not gc.isenabled()  # off before: left off
    finally:
        gc.enable()
