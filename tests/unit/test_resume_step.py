"""The last step of an event log (nblog.format._steps), read from its ends with the stdlib.

init and every listing read it (a resume continues the step counter after it); it must find the highest
non-system step near the end however long the log is, and never fail on a torn or
damaged log.
"""

from __future__ import annotations

import os

from nblog.format import _format as F
from nblog.format._steps import HEAD as _HEAD
from nblog.format._steps import TAIL as _TAIL
from nblog.format._steps import log_last_step
from nblog.write._resume_step import resume_step
from nblog.write._writer import Writer


def write_log(path, points, texts=(), system_tags=()):
    """An event log with scalar tag 0 (``points``: steps), text tag 1, system tags 2+."""
    defs = [(0, F.KIND_SCALAR, "loss"), (1, F.KIND_TEXT, "note")]
    defs += [(2 + i, F.KIND_SYSTEM, name) for i, name in enumerate(system_tags)]
    w = Writer(str(path), {"rank": 0}, flush_interval=60)
    w.tag_defs.extend(defs)
    for step in points:
        w.points += F.POINT.pack(step, 0.5, 0, 0)
    w.flush()
    for step, text in texts:
        w.texts.append((step, 1, 0, text))
    for i, step in enumerate(system_tags.values() if isinstance(system_tags, dict) else ()):
        w.points += F.POINT.pack(step, 1.0, 2 + i, 0)
    w.flush()
    return w


def test_a_short_log_gives_its_highest_step_and_text_counts(tmp_path):
    path = tmp_path / "events.r0.s0.log"
    write_log(path, range(100), texts=[(120, "late note")]).close({})
    assert log_last_step(str(path)) == 120


def test_a_log_longer_than_both_windows_is_read_at_its_end(tmp_path):
    path = tmp_path / "events.r0.s0.log"
    n = 3 * (_HEAD + _TAIL) // F.POINT_SIZE
    w = write_log(path, range(n))
    w.close({})
    assert os.path.getsize(path) > _HEAD + _TAIL
    assert log_last_step(str(path)) == n - 1


def test_system_points_do_not_count(tmp_path):
    path = tmp_path / "events.r0.s0.log"
    write_log(path, range(10), system_tags={"system/cpu_percent": 10**6}).close({})
    assert log_last_step(str(path)) == 9


def test_a_torn_tail_is_left_out_and_garbage_gives_none(tmp_path):
    path = tmp_path / "events.r0.s0.log"
    w = write_log(path, range(10))
    w.points += b"".join(F.POINT.pack(s, 0.5, 0, 0) for s in range(10, 20))
    w.flush()
    w.close({})
    data = path.read_bytes()
    end_frame = data.rfind(F.FRAME_MAGIC)  # the END frame; the points frame before it
    torn = data[: data.rfind(F.FRAME_MAGIC, 0, end_frame) + F.FRAME_HEADER_SIZE + 30]
    path.write_bytes(torn)  # what a kill -9 in the middle of a write leaves
    assert log_last_step(str(path)) == 9
    path.write_bytes(b"not an event log at all" * 100)
    assert log_last_step(str(path)) is None
    assert log_last_step(str(tmp_path / "missing.log")) is None


def test_resume_step_uses_the_latest_session_with_steps_and_run_json_as_a_floor(tmp_path):
    write_log(tmp_path / "events.r0.s0.log", range(100)).close({})
    write_log(tmp_path / "events.r0.s1.log", range(50, 80)).close({})
    write_log(tmp_path / "events.r0.s2.log", []).close({})  # killed before its first step
    write_log(tmp_path / "events.r3.s3.log", range(500)).close({})  # another rank: ignored
    assert resume_step(str(tmp_path), []) == 80  # session 1's last step, the last one shown
    assert resume_step(str(tmp_path), [{"session": 1, "last_step": 90}]) == 91
    assert resume_step(str(tmp_path), [], before=1) == 100
    assert resume_step(str(tmp_path / "nothing"), []) == 0


def test_system_points_mixed_into_a_frame_do_not_count_whatever_the_column_widths(tmp_path):
    """One COLUMNS frame holding scalar and system records (the sampler logs into the same
    buffer): the step column alone would say the system records' step; each layout of the
    tag column (a repeated pattern, 2-byte and 4-byte ids) and of the step column."""
    for k, (steps, sys_step, tids) in enumerate([
        (range(10), 10**6, None),  # pattern of ids
        (range(70_000, 70_010), 10**9, None),  # 4-byte steps
        (range(10), 10**12, [0, 0, 0, 2] + [0] * 7),  # no pattern: 2-byte ids
        (range(10), 5, [0] * 10 + [2]),  # the system point is below: the scalars' highest
    ]):
        path = tmp_path / f"events.r0.s{k}.log"
        w = Writer(str(path), {"rank": 0}, flush_interval=60)
        w.tag_defs.extend([(0, F.KIND_SCALAR, "loss"), (2, F.KIND_SYSTEM, "system/cpu_percent")])
        ids = tids or [0, 2] * len(steps)
        recs = []
        it = iter(steps)
        for tid in ids:
            recs.append(F.POINT.pack(sys_step if tid == 2 else next(it, max(steps)), 0.5, tid, 0))
        w.points += b"".join(recs)
        w.flush()
        w.close({})
        assert F.FRAME_COLUMNS in {kind for kind, _ in _frames_of(path)}
        assert log_last_step(str(path)) == max(steps), k


def _frames_of(path):
    from nblog.format._steps import frames

    data = path.read_bytes()
    return list(frames(data, F.FILE_HEADER.size))
