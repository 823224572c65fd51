"""kill -9 at random moments, many times, with fixed seeds (SPEC §5: data lost on
``kill -9`` is bounded by the flush interval and earlier data is never corrupted).

Each trial starts 3 ranks of one run (torchrun's variables, a shared ``NB_RUN_ID``,
timers on every rank, system metrics, text and images on rank 0, resume="auto")
and kills every one of them with SIGKILL: either at a random time after it booted
(some land inside ``init``: folder and ``run.json`` creation, or a session start), or
from inside, at its n-th filesystem call (mkdir, open, write, ftruncate, replace...),
sometimes after writing only part of the bytes of that call (a torn write).

After every kill:
- the run reads without error and no byte is reported corrupt (``skipped_bytes``);
- per file, the scalars, timers, text and images read are exactly a prefix of what
  that process logged, at least up to its last completed ``flush()`` (the children
  report through a pipe what they logged and when ``flush()`` returned);
- every image reads back with its exact pixels (blob checksums verified);
- ``run.json`` always parses once it exists (atomic replace), ``nb ls`` and
  ``nb show`` work.

Trials are chained: each trial is a resumed session of the run the last one killed
(a new session of every rank, restarting from an earlier "checkpoint" step); every
chain of 10 ends with a clean session from step 0 that must write and read cleanly:
END frames, status finished, and only its own points visible (the hiding rule).

30 trials (90 killed processes) by default; ``NB_HARDENING_FULL=1`` runs 200 trials
(600 killed processes), ``NB_KILLS=N`` any number. The trial records are printed.
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from hardkit import FULL, HERE, Reports, start_child, torchrun_env
from k9values import expected_image, expected_scalars, expected_text

import nblog as nb
from nblog.format._runfile import read_run_json
from nblog.reader._runs.catalog import list_runs

CHILD = HERE / "_k9_child.py"
KILLS = int(os.environ.get("NB_KILLS", "200" if FULL else "30"))
CHAIN = 10
WORLD = 3
SEED = 20261130
INIT_CALLS = 8  # rank 0's filesystem calls up to its first run.json


@dataclass
class Child:
    rank: int
    trial: int
    start: int
    proc: object
    reports: Reports
    kill_at: int = 0
    tear: bool = False
    booted_at: float | None = None
    kill_time: float | None = None
    killed: bool = False
    flushed: int = 0
    session: int | None = None
    rc: int | None = None
    err: str = ""


def start_trial(root: Path, run_id: str, trial: int, start: int, rng: random.Random, *,
                inject_rank: int | None, steps: int | None = None, logdir: Path) -> list[Child]:
    children = []
    for rank in range(WORLD):
        spec = {"trial": trial, "start": start, "steps": steps, "flush_every": 10, "sleep": 0.002}
        kill_at, tear = 0, False
        if rank == inject_rank:
            kill_at = rng.randint(1, 10) if rng.random() < 0.5 else int(math.exp(rng.uniform(math.log(10), math.log(400))))
            tear = rng.random() < 0.5
            spec.update(kill_at=kill_at, tear=tear)
        env = torchrun_env(rank, WORLD, NB_DIR=str(root), NB_RUN_ID=run_id,
                           TORCHELASTIC_RESTART_COUNT=str(trial), NB_WAIT_S="60")
        rep = Reports()
        err = open(logdir / f"t{trial}.r{rank}.err", "w")  # noqa: SIM115  (closed by the child's exit)
        proc = start_child(CHILD, [json.dumps(spec)], env, rep, stdout=err, stderr=err)
        err.close()
        children.append(Child(rank, trial, start, proc, rep, kill_at, tear))
    return children


def kill_delay(rng: random.Random) -> float:
    """Seconds after boot: a third inside init (a few ms), a third early, a third later."""
    return rng.choice((rng.uniform(0, 0.02), rng.uniform(0, 0.15), rng.uniform(0, 0.8)))


def kill_all(children: list[Child], rng: random.Random) -> None:
    delays = [kill_delay(rng) for _ in children]
    deadline = time.monotonic() + 120
    while not all(c.killed or c.rc is not None for c in children):
        assert time.monotonic() < deadline, "children never booted"
        for c, d in zip(children, delays, strict=True):
            if c.killed or c.rc is not None:
                continue
            c.reports.read(0)
            if c.booted_at is None and "B" in c.reports.lines:
                c.booted_at = time.monotonic()
                c.kill_time = c.booted_at + (d if not c.kill_at else 3.0)  # injected: it kills itself
            if c.proc.poll() is not None:
                c.rc = c.proc.returncode
            elif c.kill_time is not None and time.monotonic() >= c.kill_time:
                c.proc.send_signal(signal.SIGKILL)
                c.killed = True
        time.sleep(0.001)
    for c in children:
        c.rc = c.proc.wait(timeout=60)
        c.reports.drain()
        c.reports.close()
        assert c.rc == -signal.SIGKILL, f"rank {c.rank} of trial {c.trial} exited {c.rc} instead of dying of SIGKILL"
        note(c)


def note(c: Child) -> None:
    for ln in c.reports.lines:
        if ln.startswith("F "):
            c.flushed = max(c.flushed, int(ln.split()[1]))
        elif ln.startswith("I "):
            c.session = int(ln.split()[1])


def phase(c: Child) -> str:
    """Where a child was when it died."""
    if "I" not in {ln[:1] for ln in c.reports.lines}:
        return "in init" if c.trial % CHAIN == 0 else "in init (session start)"
    return "before first flush" if not c.flushed else "logging"


def by_session(df, s: int):
    import polars as pl

    return df.filter(pl.col("session") == s)


def check_run(run_dir: Path, children: dict[tuple[int, int], Child], *, final: Child | None = None) -> dict:
    """Everything the module docstring promises after a kill; returns counts."""
    files = sorted(p.name for p in run_dir.iterdir()) if run_dir.exists() else []
    try:
        r = nb.RunReader(run_dir)
    except nb.RunNotFoundError:  # killed between mkdir and the first event log
        assert not [f for f in files if f.startswith("events.") or f == "run.json"], files
        return {"files": 0}
    if any(c.rank == 0 and c.session is not None for c in children.values()):
        assert isinstance(read_run_json(str(run_dir)), dict), "run.json torn or missing after rank 0 started"
    stats = {"files": 0, "points": 0, "pending_bytes": 0}
    for rank in r.ranks():
        sessions = r.sessions(rank)
        sc = r.scalars(rank=rank, include_hidden=True)
        tm = r.timers(rank=rank, include_hidden=True)
        tx = r.text(rank=rank, include_hidden=True)
        md = r.media(rank=rank, include_hidden=True)
        for s in sessions:
            stats["files"] += 1
            stats["pending_bytes"] += s["pending_bytes"]
            assert s["skipped_bytes"] == 0, s
            assert s["unknown_frames"] == 0, s
            trial = s["restart_counts"].get("TORCHELASTIC_RESTART_COUNT")
            c = children.get((rank, int(trial))) if trial is not None else None
            sid = s["session"]
            sc_s, tm_s, tx_s, md_s = (by_session(df, sid) for df in (sc, tm, tx, md))
            if c is None:  # a header torn by the kill: nothing may follow it
                assert not (len(sc_s) or len(tm_s) or len(tx_s) or len(md_s)), s
                continue
            assert s["pid"] == c.proc.pid
            if c.session is not None:
                assert c.session == sid or rank != 0
            check_prefix(r, rank, c, sc_s, tm_s, tx_s, md_s)
            stats["points"] += len(sc_s) + len(tm_s)
    assert list_runs(run_dir.parent.parent) is not None
    return stats


def check_prefix(r, rank: int, c: Child, sc, tm, tx, md) -> None:
    start, flushed = c.start, c.flushed
    # timers: one per step on every rank, in step order, never a step not logged
    steps = tm["step"].to_list()
    assert steps == list(range(start, start + len(steps))), (c, steps[:20])
    assert len(steps) >= flushed, (c, len(steps))
    assert all(math.isfinite(v) and v >= 0 for v in tm["value"].to_list())
    if rank != 0:
        assert not (len(sc) or len(tx) or len(md))
        return
    got = list(zip(sc["step"].to_list(), sc["tag"].to_list(), sc["value"].to_list(), strict=True))
    want = [(st, tag, v) for st in range(start, start + len(got) // 3 + 2) for tag, v in expected_scalars(c.trial, st)]
    assert got == want[: len(got)], (c, got[:6])
    assert len(got) >= 3 * flushed, (c, len(got))
    texts = list(zip(tx["step"].to_list(), tx["text"].to_list(), strict=True))
    text_steps = [st for st in range(start, start + len(texts) * 5 + 10) if st % 5 == 0]
    assert texts == [(st, expected_text(c.trial, st)) for st in text_steps[: len(texts)]], c
    assert len(texts) >= sum(1 for st in range(start, start + flushed) if st % 5 == 0)
    img_steps = md["step"].to_list()
    want_steps = [st for st in range(start, start + len(img_steps) * 10 + 20) if st % 10 == 0]
    assert img_steps == want_steps[: len(img_steps)], c
    assert len(img_steps) >= sum(1 for st in range(start, start + flushed) if st % 10 == 0)
    for row in md.iter_rows(named=True):
        assert row["kind"] == "image" and row["tag"] == "pred"
        assert np.array_equal(np.asarray(r.image(row)), expected_image(c.trial, row["step"])), row


def check_clean_end(run_dir: Path, final: dict[int, Child]) -> None:
    """After a chain's clean session from step 0: only its points are visible."""
    r = nb.RunReader(run_dir)
    meta = read_run_json(str(run_dir))
    assert meta["status"] == "finished", meta["status"]
    for rank, c in final.items():
        last = r.sessions(rank)[-1]
        assert last["end"] is not None and last["end"]["status"] == "finished", last
        assert last["restart_counts"]["TORCHELASTIC_RESTART_COUNT"] == str(c.trial)
        assert r.timers(rank=rank)["step"].to_list() == list(range(30))
        assert set(r.timers(rank=rank)["session"].to_list()) == {last["session"]}
    c = final[0]
    sc = r.scalars()
    got = list(zip(sc["step"].to_list(), sc["tag"].to_list(), sc["value"].to_list(), strict=True))
    assert got == [(st, tag, v) for st in range(30) for tag, v in expected_scalars(c.trial, st)]
    assert r.text()["text"].to_list() == [expected_text(c.trial, st) for st in range(0, 30, 5)]
    md = r.media()
    assert md["step"].to_list() == [0, 10, 20]
    for row in md.iter_rows(named=True):
        assert np.array_equal(np.asarray(r.image(row)), expected_image(c.trial, row["step"]))


def test_kill_9_at_random_moments(tmp_path, capsys):
    rng = random.Random(SEED)
    root = tmp_path / "runs"
    logdir = tmp_path / "logs"
    logdir.mkdir()
    t0 = time.monotonic()
    records = []
    killed = 0
    chain = -1
    for trial in range(KILLS):
        if trial % CHAIN == 0:
            chain += 1
            run_id = f"k9-{chain:08x}"
            history: dict[tuple[int, int], Child] = {}
        start = 0 if trial % CHAIN == 0 else rng.randint(0, 40)
        mode = rng.choice(("random", "inject"))
        inject = None if mode == "random" else rng.choice((0, 0, 1, 2))
        children = start_trial(root, run_id, trial, start, rng, inject_rank=inject, logdir=logdir)
        kill_all(children, rng)
        killed += len(children)
        for c in children:
            history[(c.rank, c.trial)] = c
        stats = check_run(root / "k9" / run_id, history)
        records.append({"trial": trial, "mode": mode, "inject": [(c.rank, c.kill_at, c.tear) for c in children if c.kill_at],
                        "flushed": [c.flushed for c in children], "phases": [phase(c) for c in children], **stats})
        if trial % CHAIN == CHAIN - 1 or trial == KILLS - 1:
            clean = start_trial(root, run_id, 10_000 + trial, 0, rng, inject_rank=None, steps=30, logdir=logdir)
            for c in clean:
                c.proc.wait(timeout=120)
                c.reports.drain()
                c.reports.close()
                note(c)
                assert c.proc.returncode == 0, (logdir / f"t{c.trial}.r{c.rank}.err").read_text()
                history[(c.rank, c.trial)] = c
            check_run(root / "k9" / run_id, history)
            check_clean_end(root / "k9" / run_id, {c.rank: c for c in clean})
    elapsed = time.monotonic() - t0
    phases = {}
    for rec in records:
        for ph in rec["phases"]:
            phases[ph] = phases.get(ph, 0) + 1
    with capsys.disabled():
        print(f"\nkill -9 harness: {KILLS} trials, {killed} processes killed with SIGKILL "
              f"(when: {phases}), "
              f"{chain + 1} clean resumed sessions, {elapsed:.1f} s")
    assert killed == KILLS * WORLD


def test_kill_9_at_each_filesystem_call_of_a_first_init(tmp_path, capsys):
    """Rank 0 dies at each of its first filesystem calls (project and run folders, event
    log and its header, run.json temp file and rename...; a write is torn first), then
    a resumed session starts, writes and reads cleanly."""
    root = tmp_path / "runs"
    hit = []
    for kill_at in range(1, INIT_CALLS + 1):
        run_id = f"init-{kill_at:08x}"
        spec = {"trial": 1, "start": 0, "steps": None, "kill_at": kill_at, "tear": True}
        env = torchrun_env(0, 1, NB_DIR=str(root), NB_RUN_ID=run_id, TORCHELASTIC_RESTART_COUNT="1")
        rep = Reports()
        proc = start_child(CHILD, [json.dumps(spec)], env, rep)
        proc.communicate(timeout=120)
        rep.drain()
        rep.close()
        assert proc.returncode == -signal.SIGKILL
        c = Child(0, 1, 0, proc, rep, kill_at, True)
        note(c)
        hit.append(next(ln[2:] for ln in rep.lines if ln.startswith("K ")))
        history = {(0, 1): c}
        check_run(root / "k9" / run_id, history)
        rep = Reports()
        env = {**env, "TORCHELASTIC_RESTART_COUNT": "2"}
        again = start_child(CHILD, [json.dumps({"trial": 2, "start": 0, "steps": 30})], env, rep)
        _out, err = again.communicate(timeout=120)
        rep.drain()
        rep.close()
        assert again.returncode == 0, err
        c2 = Child(0, 2, 0, again, rep)
        note(c2)
        history[(0, 2)] = c2
        check_run(root / "k9" / run_id, history)
        check_clean_end(root / "k9" / run_id, {0: c2})
    with capsys.disabled():
        print("\nkilled at: " + ", ".join(hit))
    calls = " ".join(hit)
    for expected in ("mkdir", "open events.r0.s0.log", "open .run.json", "replace .run.json"):
        assert expected in calls, hit
