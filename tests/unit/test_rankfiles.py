"""nblog.reader._runfiles.rankfiles: the one layer that finds, orders and reads a rank's files.

Files are built frame by frame with nblog.format._format (as tests/unit/test_logfile.py
does), or logged by a real ``nb.init`` run.
"""

from __future__ import annotations

import numpy as np

import nblog as nb
from nblog.format import _format as F
from nblog.reader import RunReader
from nblog.reader._file.logfile import LogFile
from nblog.reader.lowlevel import RankFiles, event_files, follow, ranks_with_logs, read_all


def points_frame(steps, tag=0):
    return F.frame(F.FRAME_POINTS, b"".join(F.POINT.pack(s, s + 0.5, tag, s) for s in steps))


def log_bytes(*frames: bytes) -> bytes:
    head = F.json_frame(F.FRAME_SESSION, {"rank": 0, "session": 0, "wall_start": 1000.0})
    tags = F.frame(F.FRAME_TAGS, F.encode_tag_defs([(0, F.KIND_SCALAR, "loss")]))
    return F.file_header() + head + tags + b"".join(frames)


def test_listing_names_only_event_logs(tmp_path):
    for name in ("events.r0.s0.log", "events.r0.s1.log", "events.r3.s0.log", "media.r0.pack",
                 "console.r0.s0.log", "run.json", "events.rx.s0.log"):
        (tmp_path / name).write_bytes(b"")
    assert sorted(event_files(tmp_path)) == [(0, 0), (0, 1), (3, 0)]
    assert ranks_with_logs(tmp_path) == [0, 3]
    assert event_files(tmp_path / "absent") == {} and ranks_with_logs(tmp_path / "absent") == []


def test_a_small_window_reads_what_one_big_read_reads(tmp_path):
    """One poll rule: a window smaller than a frame grows until the frame fits, and the
    records come out as a whole-file read gives them, torn tail left pending."""
    frames = [points_frame(range(i * 1000, (i + 1) * 1000)) for i in range(5)]  # 24 kB frames
    data = log_bytes(*frames) + frames[0][:100]  # a torn last frame
    path = tmp_path / "events.r0.s0.log"
    path.write_bytes(data)
    whole = read_all(LogFile(str(path)))
    small = read_all(LogFile(str(path), window=4096))
    assert small.points()["step"].tolist() == whole.points()["step"].tolist() == list(range(5000))
    assert small.offset == whole.offset == len(data) - 100
    assert small.pending_bytes == whole.pending_bytes == 100


def test_new_sessions_are_found_and_hidden_points_follow_the_rule(tmp_path):
    (tmp_path / "events.r0.s0.log").write_bytes(log_bytes(points_frame(range(0, 10))))
    rf = RankFiles(tmp_path)
    rf.scan()
    assert [s for s, _lf in rf.open_new(0)] == [0]
    for _s, lf in rf.sessions(0):
        read_all(lf)
    assert rf.thresholds(0) == {0: None}
    (tmp_path / "events.r0.s1.log").write_bytes(log_bytes(points_frame(range(6, 12))))
    assert rf.scan() is True
    assert [s for s, lf in rf.open_new(0) if read_all(lf)] == [1]
    assert rf.thresholds(0) == {0: 6, 1: None}  # session 0's steps >= 6 are hidden
    assert rf.open_new(0) == []


def test_follow_stops_at_the_timeout_with_the_injected_clock():
    now = [0.0]
    batches = iter([[1], [], [2, 3]])
    polls = follow(lambda: next(batches, []), 1.0, timeout=2.5, sleep=lambda s: now.__setitem__(0, now[0] + s),
                   clock=lambda: now[0])
    assert list(polls) == [[1], [2, 3]]  # empty polls are not yielded
    every = follow(lambda: [], 1.0, timeout=10, sleep=lambda s: None, clock=lambda: 0.0, every=True,
                   done=lambda: True)
    assert list(every) == [[]]  # every poll, and done() ends it after the first


def test_histogram_of_a_record_is_the_reader_s(tmp_path):
    run = nb.init("p", root=str(tmp_path), system=False, _environ={})
    values = np.arange(10, dtype=float)
    run.add_histogram("w", values, step=3, bins=4)
    run.finish()
    reader = RunReader(run.dir)
    (row,) = reader.media(kind="histogram").to_dicts()
    edges, counts = reader.histogram(row)
    want_counts, want_edges = np.histogram(values, bins=4)
    assert counts.tolist() == want_counts.tolist() and np.allclose(edges, want_edges)
