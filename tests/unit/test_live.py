"""nblog.reader._views.live.LiveRun: the same points as RunReader (hiding, wall and active time),
extended incrementally as files grow, rebuilt on a new session."""

from __future__ import annotations

import os
import shutil
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tui"))

import nbtui_synth as synth  # noqa: E402

from nblog.format import _format as F  # noqa: E402
from nblog.reader._views.live import LiveRun  # noqa: E402
from nblog.reader._views.reader import RunReader  # noqa: E402


@pytest.fixture
def run_dir(tmp_path):
    return synth.write_run(str(tmp_path))


def same_as_reader(live: LiveRun, reader: RunReader, rank: int, tag: str, kind: str = "scalar") -> None:
    s = live.series(rank, [tag], kind)[tag]
    df = (reader.scalars if kind == "scalar" else reader.timers)([tag], rank=rank)
    np.testing.assert_array_equal(s.step, df["step"].to_numpy())
    np.testing.assert_array_equal(s.value, df["value"].to_numpy())
    np.testing.assert_allclose(s.wall, df["wall_time"].to_numpy())
    np.testing.assert_allclose(s.active, df["active_time"].to_numpy())
    np.testing.assert_array_equal(s.session, df["session"].to_numpy())


def test_series_match_the_reader(run_dir):
    live, reader = LiveRun(run_dir), RunReader(run_dir)
    for tag in ("train/loss", "grad/norm", "eval/loss", synth.ODD_TAG):
        same_as_reader(live, reader, 0, tag)
    for rank in range(4):
        same_as_reader(live, reader, rank, "data", "timer")
    s = live.series(0, ["train/loss"])["train/loss"]
    assert s.step.max() == 199 and (np.diff(s.step) > 0).all()  # session 0's steps >= 80 hidden
    assert live.tags(0) == sorted(synth.SCALARS)
    assert live.ranks() == [0, 1, 2, 3] and live.last_step(0) == 199
    assert {m["hostname"] for m in live.machines()} == {"node-a", "node-b"}
    texts = live.text(0)
    assert [t[1] for t in texts] == [0, 50, 100, 150] and "[red]" in texts[0][3]
    assert live.series(0, ["never"])["never"].n == 0


def _append(path, tid, steps, ms0):
    rec = np.zeros(len(steps), F.NUMPY_POINT_DTYPE)
    rec["step"] = steps
    rec["value"] = np.asarray(steps, float) * 2
    rec["tag"] = tid
    rec["ms"] = ms0 + np.arange(len(steps))
    with open(path, "ab") as f:
        f.write(F.frame(F.FRAME_POINTS, rec.tobytes()))


def test_refresh_appends_and_rebuilds_on_a_new_session(tmp_path):
    d = tmp_path / "p" / "r-00000001"
    d.mkdir(parents=True)
    ef = synth.EventFile(str(d / "events.r0.s0.log"), synth.header(0, 0, 0, "h", 1000.0))
    tid = ef.tag(F.KIND_SCALAR, "loss")
    _append(ef.path, tid, range(10), 0)
    live = LiveRun(str(d))
    s = live.series(0, ["loss"])["loss"]
    view = s.step
    assert s.n == 10 and not live.refresh()
    _append(ef.path, tid, range(10, 15), 100)
    assert live.refresh() and s.n == 15 and s.rebuilt == 0
    assert view.tolist() == list(range(10))  # views handed out earlier stay as they were
    ef2 = synth.EventFile(str(d / "events.r0.s1.log"), synth.header(0, 0, 1, "h", 5000.0))
    _append(ef2.path, ef2.tag(F.KIND_SCALAR, "loss"), range(12, 14), 0)
    assert live.refresh() and s.rebuilt == 1
    assert s.step.tolist() == list(range(14)) and s.session.tolist() == [0] * 12 + [1, 1]
    same_as_reader(live, RunReader(str(d)), 0, "loss")
    shutil.rmtree(d)
    assert live.refresh() and live.gone and s.n == 14


def test_many_small_blocks_are_merged(tmp_path):
    d = tmp_path / "p" / "r-00000002"
    d.mkdir(parents=True)
    ef = synth.EventFile(str(d / "events.r0.s0.log"), synth.header(0, 0, 0, "h", 1000.0))
    tid = ef.tag(F.KIND_SCALAR, "loss")
    live = LiveRun(str(d))
    s = live.series(0, ["loss"])["loss"]
    for i in range(200):
        _append(ef.path, tid, [i], i)
        live.refresh()
    assert s.step.tolist() == list(range(200))
    assert live.sessions(0)[0]["blocks"] < 70


def test_a_session_longer_than_the_u32_millisecond_clock_unwraps(tmp_path):
    """Point times are u32 milliseconds (they wrap after 49.7 days); readers unwrap them,
    within a frame and across frames, live and bulk alike."""
    run_dir = tmp_path / "p" / "long"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text('{"id": "long", "project": "p"}')
    top = 1 << 32
    # a real session writes at least a heartbeat a minute: no two times 2**31 ms apart
    q = 1 << 30
    ms_true = [10, 2 * q + 5, top - 20, top - 10, top + 5, top + 15, top + q + 7, top + 3 * q, 2 * top + 9]
    frames = [[0], [1], [2, 3, 4], [5, 6, 7], [8]]  # wraps inside a frame (3-4) and between frames (7-8)
    data = F.file_header() + F.json_frame(F.FRAME_SESSION, {"rank": 0, "session": 0, "wall_start": 1000.0})
    data += F.frame(F.FRAME_TAGS, F.encode_tag_defs([(0, F.KIND_SCALAR, "loss")]))
    for idx in frames:
        data += F.frame(F.FRAME_POINTS, b"".join(F.POINT.pack(i, i * 0.5, 0, ms_true[i] % top) for i in idx))
    (run_dir / "events.r0.s0.log").write_bytes(data)
    expect = np.array(ms_true) / 1000.0
    live = LiveRun(str(run_dir))
    s = live.series(0, ["loss"])["loss"]
    np.testing.assert_allclose(s.active, expect)
    np.testing.assert_allclose(s.wall, 1000.0 + expect)
    same_as_reader(live, RunReader(str(run_dir)), 0, "loss")
