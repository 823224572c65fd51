"""Shared-filesystem safety (man 5 nb-format: writers create their files with
O_CREAT|O_EXCL|O_NOFOLLOW, files honour the umask, nothing is loaded with pickle or
eval).

Another user of a shared filesystem who can write in a run folder must not be able to
make nb write elsewhere by placing a symbolic link where nb's event log, media pack,
run.json or run.json's temp file will go (a link planted in the window between nb
choosing a name and creating the file included): nb refuses the link, the target stays
untouched, and training goes on. Not covered: a link in place of the run or project
folder itself (folders are followed, as by every program; keep them in a folder only
you can write to).
"""

from __future__ import annotations

import ast
import json
import logging
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hardkit import REPO, clean_env

import nblog as nb
from nblog.format import _runfile
from nblog.format._filesafety import create_exclusive
from nblog.write import _init as nb_init
from nblog.write._writer import Writer

SECRET = b"someone else's file: never written through a link\n"


@pytest.fixture
def victim(tmp_path) -> Path:
    path = tmp_path / "victim.txt"
    path.write_bytes(SECRET)
    return path


@pytest.mark.parametrize("dangling", [False, True])
def test_create_exclusive_never_follows_a_link(tmp_path, victim, dangling):
    target = tmp_path / "nowhere" if dangling else victim
    link = tmp_path / "events.r0.s0.log"
    link.symlink_to(target)
    with pytest.raises(FileExistsError):
        create_exclusive(str(link))
    with pytest.raises(FileExistsError):
        Writer(str(link), {"monotonic_start_ns": 0})
    assert victim.read_bytes() == SECRET and not (tmp_path / "nowhere").exists()


def plant_at_next_session(monkeypatch, target: Path) -> None:
    """The race: a link appears under the session's file name right after nb chose it."""
    real = nb_init.next_session

    def racing(run_dir, rank, at_least=0):
        n = real(run_dir, rank, at_least)
        os.symlink(target, os.path.join(run_dir, f"events.r{rank}.s{n}.log"))
        return n

    monkeypatch.setattr(nb_init, "next_session", racing)


def test_a_link_planted_where_rank_0s_event_log_goes(tmp_path, victim, monkeypatch, caplog):
    caplog.set_level(logging.WARNING, logger="nblog")
    plant_at_next_session(monkeypatch, victim)
    run = nb.init("p", run_id="link-00000000", root=tmp_path / "runs", system=False, _environ={})
    run.add_scalar("x", 1.0, step=0)  # training goes on
    run.finish()
    assert victim.read_bytes() == SECRET
    assert any("cannot create the event log" in r.getMessage() for r in caplog.records)
    assert os.path.islink(Path(run.dir) / "events.r0.s0.log")


def test_a_link_planted_where_another_ranks_event_log_goes(tmp_path, victim, monkeypatch, caplog):
    caplog.set_level(logging.WARNING, logger="nblog")
    root = tmp_path / "runs"
    nb.init("p", run_id="link-00000001", root=root, system=False, _environ={}).finish()
    plant_at_next_session(monkeypatch, victim)
    env = {"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "NB_RUN_ID": "link-00000001"}
    run = nb.init("p", root=root, system=False, timing_all_ranks=True, _environ=env)
    with run.timer("t", step=0):
        pass
    run.finish()
    assert victim.read_bytes() == SECRET
    assert [p.is_symlink() for p in (root / "p" / "link-00000001").glob("events.r1.*")] == [True]


def test_a_link_in_place_of_the_media_pack(tmp_path, victim, caplog):
    caplog.set_level(logging.WARNING, logger="nblog")
    root = tmp_path / "runs"
    run_dir = root / "p" / "media-00000000"
    run_dir.mkdir(parents=True)
    (run_dir / "media.r0.pack").symlink_to(victim)
    run = nb.init("p", run_id="media-00000000", root=root, resume="auto", system=False, _environ={})
    run.add_image("img", np.zeros((4, 4), np.uint8), step=0)
    run.add_scalar("x", 1.0, step=0)
    run.finish()
    assert victim.read_bytes() == SECRET
    r = nb.RunReader(run.dir)
    assert r.sessions()[0]["dropped"]["write_error"] == 1 and len(r.media()) == 0
    assert r.scalars()["value"].to_list() == [1.0]


def test_a_link_in_place_of_run_json_or_its_temp_file(tmp_path, victim, monkeypatch):
    root = tmp_path / "runs"
    run_dir = root / "p" / "json-00000000"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").symlink_to(victim)
    run = nb.init("p", run_id="json-00000000", root=root, resume="auto", system=False, _environ={})
    run.finish()
    assert victim.read_bytes() == SECRET  # the link itself was replaced by the new run.json
    assert not os.path.islink(run_dir / "run.json")
    assert json.loads((run_dir / "run.json").read_text())["status"] == "finished"

    monkeypatch.setattr(_runfile.os, "urandom", lambda n: b"\xab" * n)  # a temp name someone guessed
    tmp = run_dir / f".run.json.{os.getpid()}.{'ab' * 4}.tmp"
    tmp.symlink_to(victim)
    with pytest.raises(FileExistsError):
        _runfile.write_json_atomic(str(run_dir / "run.json"), {"x": 1})
    assert victim.read_bytes() == SECRET
    assert json.loads((run_dir / "run.json").read_text())["status"] == "finished"


UMASK_CHILD = textwrap.dedent("""
    import os, sys
    import numpy as np
    os.umask(int(sys.argv[2], 8))
    import nblog as nb
    run = nb.init("p", run_id="umask-00000000", root=sys.argv[1], system=False)
    run.add_scalar("x", 1.0, step=0)
    run.add_image("img", np.zeros((2, 2), np.uint8), step=0)
    run.finish()
""")


@pytest.mark.parametrize("umask", ["022", "077", "002", "027"])
def test_files_and_folders_honour_the_umask(tmp_path, umask):
    root = tmp_path / "runs"
    p = subprocess.run([sys.executable, "-c", UMASK_CHILD, str(root), umask], env=clean_env(), capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    mask = int(umask, 8)
    run_dir = root / "p" / "umask-00000000"
    for folder in (root, root / "p", run_dir):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o777 & ~mask, folder
    files = sorted(run_dir.iterdir())
    # the provenance diff is there when the folder the child runs in is a dirty git checkout
    assert [f.name for f in files if f.name != "provenance.r0.s0.diff"] == [
        "events.r0.s0.log", "media.r0.pack", "provenance.r0.s0.json", "run.json"]
    for f in files:
        assert stat.S_IMODE(f.stat().st_mode) == 0o666 & ~mask, f


_UNSAFE_MODULES = {"pickle", "cPickle", "_pickle", "marshal", "shelve", "dill", "cloudpickle", "joblib", "yaml"}
_UNSAFE_CALLS = {"eval", "exec", "compile", "__import__", "execfile"}


def test_nothing_is_loaded_with_pickle_or_eval():
    """No module of nblog or nbcli imports pickle-like loaders or calls eval/exec (AST,
    so comments and docstrings do not count), and numpy never loads with pickles."""
    found = []
    files = sorted((REPO / "nblog").rglob("*.py")) + sorted((REPO / "nbcli").rglob("*.py"))
    assert len(files) > 20
    for path in files:
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [(node.module or "").split(".")[0]]
            else:
                names = []
            found += [f"{path.relative_to(REPO)}:{node.lineno} imports {n}" for n in names if n in _UNSAFE_MODULES]
            if isinstance(node, ast.Call):
                fn = node.func
                name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else ""
                if name in _UNSAFE_CALLS and not (isinstance(fn, ast.Attribute) and name == "compile"):
                    found.append(f"{path.relative_to(REPO)}:{node.lineno} calls {name}")
                if name in ("load", "loads") and isinstance(fn, ast.Attribute):
                    owner = fn.value.id if isinstance(fn.value, ast.Name) else ""
                    if owner in ("pickle", "marshal", "yaml", "torch", "dill"):
                        found.append(f"{path.relative_to(REPO)}:{node.lineno} calls {owner}.{name}")
                for kw in node.keywords:
                    if kw.arg == "allow_pickle" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                        found.append(f"{path.relative_to(REPO)}:{node.lineno} allow_pickle")
    assert not found, found
