"""``nb ls`` on a root of many runs (issue 18: 20,000 runs in at most a second): what it
learnt of each run is kept in a cache, and a run whose folder and run.json did not
change is listed again without reading its run.json; a changed one is read afresh."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nblog as nb
from nblog.reader._runs.listing_cache import MIN_RUNS

_LS = r"""
import atexit, json, os, sys
root = os.path.abspath(sys.argv[1])
opened = []

def hook(event, args):
    if event == "open" and args and isinstance(args[0], str) and args[0].endswith("run.json"):
        if os.path.abspath(args[0]).startswith(root + os.sep):
            opened.append(os.path.relpath(args[0], root))

sys.addaudithook(hook)
atexit.register(lambda: sys.stderr.write("OPENED " + json.dumps(sorted(opened)) + "\n"))
from nbcli.app import main
sys.argv = ["nb", "ls", "--root", root, "--json"]
main()
"""


def ls(root: Path, cache: Path) -> tuple[list[dict], list[str]]:
    env = {**os.environ, "NB_CACHE_DIR": str(cache)}
    out = subprocess.run([sys.executable, "-c", _LS, str(root)], env=env, capture_output=True, text=True,
                         timeout=120, check=True)
    opened = json.loads(out.stderr.rsplit("OPENED ", 1)[1])
    return json.loads(out.stdout), opened


def age(path: Path, seconds: float = 3600.0) -> None:
    """Date the run's folder and files an hour back (a run that finished a while ago)."""
    then = time.time() - seconds
    for p in [*path.iterdir(), path]:
        os.utime(p, (then, then))


def test_unchanged_runs_are_listed_without_reading_run_json_and_changes_show(tmp_path):
    root, cache = tmp_path / "runs", tmp_path / "cache"
    run = nb.init("p", run_id="seed-00000000", root=root, system=False, provenance=False, _environ={})
    run.add_scalar("loss", 1.0, step=0)
    run.finish()
    for i in range(MIN_RUNS):
        shutil.copytree(root / "p" / "seed-00000000", root / "p" / f"r{i:05d}-00000000")
    for d in (root / "p").iterdir():
        age(d)
    first, opened = ls(root, cache)
    assert len(first) == MIN_RUNS + 1 and len(opened) == MIN_RUNS + 1
    again, opened = ls(root, cache)
    assert again == first and opened == []  # every run from the cache: no run.json read
    # a run resumed (run.json replaced, a new session's log) and a run removed
    changed = root / "p" / "r00007-00000000"
    meta = json.loads((changed / "run.json").read_text())
    meta["name"] = "renamed"
    (changed / "run.json.new").write_text(json.dumps(meta))
    os.replace(changed / "run.json.new", changed / "run.json")
    (changed / "events.r3.s0.log").write_bytes((changed / "events.r0.s0.log").read_bytes())
    shutil.rmtree(root / "p" / "r00008-00000000")
    third, opened = ls(root, cache)
    assert opened == ["p/r00007-00000000/run.json"]
    rows = {r["id"]: r for r in third}
    assert "r00008-00000000" not in rows and len(rows) == MIN_RUNS
    assert rows["r00007-00000000"]["name"] == "renamed" and rows["r00007-00000000"]["ranks"] == 2
    assert rows["r00007-00000000"]["size_bytes"] > rows["r00006-00000000"]["size_bytes"]
    # sizes and modification times are always taken afresh
    with open(root / "p" / "r00009-00000000" / "events.r0.s0.log", "ab") as f:
        f.write(b"\0" * 100)
    fourth, opened = ls(root, cache)
    rows4 = {r["id"]: r for r in fourth}
    assert rows4["r00009-00000000"]["size_bytes"] == rows["r00009-00000000"]["size_bytes"] + 100
    assert "p/r00009-00000000/run.json" not in opened


def test_no_cache_for_a_small_root_or_when_turned_off(tmp_path):
    root, cache = tmp_path / "runs", tmp_path / "cache"
    nb.init("p", run_id="one-00000000", root=root, system=False, provenance=False, _environ={}).finish()
    age(root / "p" / "one-00000000")
    ls(root, cache)
    assert not cache.exists()  # a small root lists fast without one: nothing written
    env = {**os.environ, "NB_CACHE_DIR": ""}
    out = subprocess.run([sys.executable, "-c", _LS, str(root)], env=env, capture_output=True, text=True,
                         timeout=60, check=True)
    assert [r["id"] for r in json.loads(out.stdout)] == ["one-00000000"]
