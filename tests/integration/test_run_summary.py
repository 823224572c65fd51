"""run.json's ``summary`` (nb-format(5), RUN.JSON), as rank 0's writer thread keeps it:
real processes log, finish, die of kill -9 or resume; the summary must equal a Polars
computation from RunReader.scalars() (visible points: last and step; min and max over
every session's points, hidden ones included, as the contract says), with NaN and ±inf
written as strings; and ``nb ls --where`` answers from it without the event logs."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import polars as pl
import pytest
from _nbproc import base_env

import nblog as nb

pytestmark = pytest.mark.timing  # run again beside a CPU hog: scripts/test_loaded.sh

NB = [sys.executable, "-c", "from nbcli.app import main; main()"]

# Logs every shape the writer folds differently: a dict of the same tags at every step
# (strided views), one tag alone, tags mixed with timers and irregular tags (the
# per-point fallback), a step logged backwards, NaN first, NaN only, ±inf.
CHILD = textwrap.dedent("""
    import json, os, sys, time
    import nblog as nb
    spec = json.loads(sys.argv[1])
    run = nb.init("summ", run_id="r", resume="auto", system=False)
    nan, inf = float("nan"), float("inf")
    s0 = spec["start"]
    for i in range(s0, s0 + spec["n"]):
        run.add_scalar({"train/loss": 1.0 / (i + 1) + spec["shift"], "train/lr": 1e-3 * (i % 5)}, step=i)
        if i % 3 == 0:
            run.add_scalar("sparse/every3", float(i) if i % 2 else nan, step=i)
            with run.timer("time/step"):
                pass
        if i == s0 + 10:
            run.add_scalar("sparse/every3", -inf, step=i - 5)  # backwards: stored, not last
            run.add_scalar("only/nan", nan, step=i)
            run.add_scalar("edge/inf", inf, step=i)
            run.add_scalar("edge/inf", 2.5, step=i)  # the latest at equal steps is last
        if i % 50 == 49:
            run.flush()  # several drains, so batches are folded one after another
    run.add_scalar("alone", spec["shift"], step=s0 + spec["n"])
    if spec.get("hang"):
        run.flush()
        want = s0 + spec["n"]
        path = os.path.join(run.dir, "run.json")
        deadline = time.monotonic() + 30  # a hang guard, never a measurement
        while time.monotonic() < deadline:  # until a progress update has the final summary
            with open(path) as f:
                got = json.load(f).get("summary", {}).get("alone", {}).get("step")
            if got == want:
                print("ready", flush=True)
                time.sleep(600)  # killed (-9) here
            time.sleep(0.05)
        print("no summary in run.json", flush=True)
        sys.exit(3)
    run.finish()
""")


def _run_child(root: Path, spec: dict, **env: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(spec)],
                            env=base_env(NB_DIR=str(root), NB_PROGRESS_S="0.2", NB_FLUSH_INTERVAL="0.1", **env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen) -> None:
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err


def _num(v: float | None) -> object:
    """The JSON form a summary value must have."""
    if v is None or math.isfinite(v):
        return v
    return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")


def _expected(run_dir: Path) -> dict:
    """Per tag: last/step of the visible points (largest step, latest among equal
    ones), min/max ignoring NaN over every point of every session, hidden included."""
    reader = nb.RunReader(str(run_dir))
    visible = reader.scalars(rank=0).with_row_index("_i")
    last = (visible.sort("step", "_i").group_by("tag", maintain_order=True)
            .agg(pl.col("value").last().alias("last"), pl.col("step").last().alias("step")))
    every = reader.scalars(rank=0, include_hidden=True)
    value = pl.col("value")
    span = every.group_by("tag").agg(value.filter(~value.is_nan()).min().alias("min"),
                                     value.filter(~value.is_nan()).max().alias("max"))
    out = {}
    for row in last.join(span, on="tag").iter_rows(named=True):
        out[row["tag"]] = {"last": _num(row["last"]), "step": row["step"], "min": _num(row["min"]),
                           "max": _num(row["max"])}
    return out


def _summary(run_dir: Path) -> dict:
    text = (run_dir / "run.json").read_text()
    assert "NaN" not in text and "Infinity" not in text  # no bare non-finite numbers
    return json.loads(text)["summary"]


def test_summary_after_finish_equals_the_points(tmp_path):
    _finish(_run_child(tmp_path, {"start": 0, "n": 400, "shift": 0.0}))
    run_dir = tmp_path / "summ" / "r"
    got = _summary(run_dir)
    assert got == _expected(run_dir)
    assert set(got) == {"train/loss", "train/lr", "sparse/every3", "only/nan", "edge/inf", "alone"}
    assert "time/step" not in got  # timers are not scalars
    assert got["only/nan"] == {"last": "nan", "step": 10, "min": None, "max": None}
    assert got["edge/inf"] == {"last": 2.5, "step": 10, "min": 2.5, "max": "inf"}
    assert got["sparse/every3"]["min"] == "-inf" and got["sparse/every3"]["step"] == 399


def test_summary_after_kill_9_is_the_last_progress_update(tmp_path):
    proc = _run_child(tmp_path, {"start": 0, "n": 300, "shift": 0.5, "hang": True})
    try:
        assert proc.stdout.readline().strip() == "ready"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
    run_dir = tmp_path / "summ" / "r"
    assert json.loads((run_dir / "run.json").read_text())["status"] == "running"  # no finish ran
    assert _summary(run_dir) == _expected(run_dir)


def test_resumed_session_folds_into_the_summary(tmp_path):
    """Session 1 restarts at step 150 of session 0's 300: last and step come from session
    1 (session 0's steps >= 150 are hidden), min and max cover both sessions."""
    _finish(_run_child(tmp_path, {"start": 0, "n": 300, "shift": -5.0}))  # session 0: the lowest values
    run_dir = tmp_path / "summ" / "r"
    first = _summary(run_dir)
    _finish(_run_child(tmp_path, {"start": 150, "n": 60, "shift": 5.0}))
    got = _summary(run_dir)
    assert got == _expected(run_dir)
    assert got["train/loss"]["step"] == 209 and got["train/loss"]["min"] == first["train/loss"]["min"]
    assert got["alone"] == {"last": 5.0, "step": 210, "min": -5.0, "max": 5.0}


def test_summary_unchanged_is_not_rewritten(tmp_path):
    """A session that logs nothing keeps the summary it found, byte for byte."""
    _finish(_run_child(tmp_path, {"start": 0, "n": 60, "shift": 0.0}))
    run_dir = tmp_path / "summ" / "r"
    before = _summary(run_dir)
    env = base_env(NB_DIR=str(tmp_path))
    subprocess.run([sys.executable, "-c", "import nblog as nb; nb.init('summ', run_id='r', resume='auto', "
                    "system=False).finish()"], env=env, check=True, timeout=60)
    meta = json.loads((run_dir / "run.json").read_text())
    assert len(meta["sessions"]) == 2 and meta["summary"] == before


def test_nb_ls_where_reads_the_written_summary(tmp_path):
    """nb ls --where on .min/.last answers from run.json alone: with the event logs
    gone (the fallback would know nothing), the runs are still told apart."""
    for rid, shift in (("low", 0.0), ("high", 10.0)):
        proc = subprocess.run([sys.executable, "-c", CHILD.replace('run_id="r"', f'run_id="{rid}"'),
                               json.dumps({"start": 0, "n": 100, "shift": shift})],
                              env=base_env(NB_DIR=str(tmp_path)), capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        for f in (tmp_path / "summ" / rid).glob("events.*"):
            f.unlink()
    env = base_env()
    for where, want in (("train/loss.min < 1", ["low"]), ("alone.last >= 10", ["high"]),
                        ("train/loss.step = 99 and alone.step = 100", ["high", "low"])):
        proc = subprocess.run([*NB, "ls", "--root", str(tmp_path), "--where", where, "--json"],
                              env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert sorted(r["id"] for r in json.loads(proc.stdout)) == sorted(want)
