"""nblog.reader._file.logfile.LogFile: incremental parsing that keeps truncation apart from corruption.

Files are built frame by frame with nblog.format._format, so each test knows exactly which
bytes are whole, torn or damaged.
"""

from __future__ import annotations

import logging
import struct
import tracemalloc
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nblog as nb
from nblog.format import _format as F
from nblog.format._walk import read_header
from nblog.reader._file.logfile import LogFile


def session_frame(**extra):
    return F.json_frame(F.FRAME_SESSION, {"rank": 0, "session": 0, "wall_start": 1000.0, **extra})


def tags_frame(*defs):
    return F.frame(F.FRAME_TAGS, F.encode_tag_defs(list(defs)))


def points_frame(steps, tag=0):
    return F.frame(F.FRAME_POINTS, b"".join(F.POINT.pack(s, s + 0.5, tag, s) for s in steps))


def raw_frame(kind, length, payload=b""):
    """A frame header with a valid header checksum declaring ``length`` bytes."""
    head = struct.pack("<3sBII", b"NBF", kind, length, zlib.crc32(payload))
    return head + struct.pack("<I", zlib.crc32(head)) + payload


PREFIX = F.file_header() + session_frame() + tags_frame((0, F.KIND_SCALAR, "loss"))
A, B, C = points_frame(range(0, 10)), points_frame(range(10, 20)), points_frame(range(20, 30))
END = F.json_frame(F.FRAME_END, {"status": "finished", "ms": 30})


def write(path, data):
    path.write_bytes(data)
    return str(path)


def steps_of(lf):
    return lf.points()["step"].tolist()


def test_a_whole_file(tmp_path):
    lf = LogFile(write(tmp_path / "f.log", PREFIX + A + B + C + END))
    lf.poll()
    assert steps_of(lf) == list(range(30))
    assert lf.points()["value"].tolist() == [s + 0.5 for s in range(30)]
    assert lf.tags == {0: (F.KIND_SCALAR, "loss")}
    assert lf.header["rank"] == 0
    assert lf.end["status"] == "finished"
    assert (lf.skipped_bytes, lf.pending_bytes, lf.unknown_frames) == (0, 0, 0)
    assert lf.first_step == 0


def test_empty_and_missing_files_read_as_nothing(tmp_path):
    lf = LogFile(write(tmp_path / "empty.log", b""))
    assert not lf.poll()
    assert len(lf.points()) == 0
    lf = LogFile(str(tmp_path / "missing.log"))
    assert not lf.poll()
    assert (lf.skipped_bytes, lf.pending_bytes) == (0, 0)


def test_every_torn_tail_is_pending_not_corrupt_and_completes_later(tmp_path):
    full = PREFIX + A + B + C + END
    whole = len(PREFIX + A + B)
    for cut in range(len(PREFIX + A + B) + 1, len(full)):
        path = tmp_path / f"cut{cut}.log"
        lf = LogFile(write(path, full[:cut]))
        lf.poll()
        complete = whole + len(C) if cut >= whole + len(C) else whole
        assert steps_of(lf) == list(range(30 if complete > whole else 20)), cut
        assert lf.skipped_bytes == 0, cut
        assert lf.pending_bytes == cut - complete, cut
        # the rest arrives: the same reader picks it up from where it stopped
        path.write_bytes(full)
        lf.poll()
        assert steps_of(lf) == list(range(30)), cut
        assert (lf.skipped_bytes, lf.pending_bytes) == (0, 0)
        assert lf.end is not None


@pytest.mark.parametrize("cut", range(1, 8))
def test_torn_file_header_is_pending(tmp_path, cut):
    lf = LogFile(write(tmp_path / "f.log", F.file_header()[:cut]))
    lf.poll()
    assert (lf.pending_bytes, lf.skipped_bytes) == (cut, 0)


def test_incremental_polls_return_only_new_frames(tmp_path):
    path = tmp_path / "f.log"
    lf = LogFile(write(path, PREFIX + A))
    first = lf.poll()
    assert [len(p) // F.POINT_SIZE for p in first.points] == [10]
    with open(path, "ab") as f:
        f.write(B)
    second = lf.poll()
    assert [len(p) // F.POINT_SIZE for p in second.points] == [10]
    assert not lf.poll()
    assert steps_of(lf) == list(range(20))


@pytest.mark.parametrize("where", ["payload", "length", "magic", "header_crc"])
def test_damage_in_a_middle_frame_is_skipped_and_counted(tmp_path, where):
    damaged = bytearray(B)
    offset = {"payload": 16 + 30, "length": 5, "magic": 1, "header_crc": 13}[where]
    damaged[offset] ^= 0x10
    lf = LogFile(write(tmp_path / "f.log", PREFIX + A + bytes(damaged) + C + END))
    lf.poll()
    assert steps_of(lf) == list(range(10)) + list(range(20, 30))
    assert lf.skipped_bytes == len(B)
    assert lf.pending_bytes == 0
    assert lf.end is not None


def test_damaged_payload_of_the_last_frame_counts_as_not_yet_written(tmp_path):
    damaged = bytearray(C)
    damaged[-1] ^= 1
    lf = LogFile(write(tmp_path / "f.log", PREFIX + A + B + bytes(damaged)))
    lf.poll()
    assert steps_of(lf) == list(range(20))
    assert (lf.skipped_bytes, lf.pending_bytes) == (0, len(C))


def test_garbage_between_frames_is_skipped_and_counted(tmp_path):
    garbage = bytes(range(256)) * 3  # no b"NBF" inside
    assert b"NBF" not in garbage
    lf = LogFile(write(tmp_path / "f.log", PREFIX + A + garbage + B + END))
    lf.poll()
    assert steps_of(lf) == list(range(20))
    assert lf.skipped_bytes == len(garbage)


def test_garbage_with_a_fake_magic_is_skipped(tmp_path):
    garbage = b"xxNBF" + bytes(40) + b"NBFNBF" + b"\xff" * 20
    lf = LogFile(write(tmp_path / "f.log", PREFIX + A + garbage + B + END))
    lf.poll()
    assert steps_of(lf) == list(range(20))
    assert lf.skipped_bytes == len(garbage)


def test_unknown_frame_types_are_skipped_counted_and_warned_once(tmp_path, caplog):
    caplog.set_level(logging.WARNING, "nblog")
    future = raw_frame(42, 5, b"hello") + raw_frame(200, 0)
    lf = LogFile(write(tmp_path / "f.log", PREFIX + A + future + B + END))
    lf.poll()
    assert steps_of(lf) == list(range(20))
    assert (lf.unknown_frames, lf.skipped_bytes) == (2, 0)
    assert len([r for r in caplog.records if "does not know" in r.getMessage()]) == 1


def test_a_declared_length_over_the_limit_is_corruption_and_never_allocated(tmp_path):
    huge = raw_frame(F.FRAME_POINTS, F.MAX_FRAME_LENGTH + 1)
    lf = LogFile(write(tmp_path / "f.log", PREFIX + A + huge + B + END))
    tracemalloc.start()
    try:
        lf.poll()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert steps_of(lf) == list(range(20))
    assert lf.skipped_bytes == len(huge)
    assert peak < 4 << 20


def test_a_huge_length_at_the_tail_is_pending_and_never_allocated(tmp_path):
    tail = raw_frame(F.FRAME_POINTS, F.MAX_FRAME_LENGTH) + b"\0" * 100
    lf = LogFile(write(tmp_path / "f.log", PREFIX + A + tail))
    tracemalloc.start()
    try:
        lf.poll()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert steps_of(lf) == list(range(10))
    assert (lf.pending_bytes, lf.skipped_bytes) == (len(tail), 0)
    assert peak < 4 << 20


def test_a_points_frame_of_partial_records_is_skipped(tmp_path):
    bad = F.frame(F.FRAME_POINTS, F.POINT.pack(1, 1.0, 0, 0) + b"\0" * 5)
    lf = LogFile(write(tmp_path / "f.log", PREFIX + A + bad + B))
    lf.poll()
    assert steps_of(lf) == list(range(20))
    assert lf.skipped_bytes == len(bad)


def test_a_newer_format_version_is_refused_clearly(tmp_path):
    newer = F.FILE_HEADER.pack(b"NBEV", F.FORMAT_VERSION + 1, 0) + session_frame() + A
    path = write(tmp_path / "f.log", newer)
    with pytest.raises(nb.FormatVersionError) as info:
        LogFile(path).poll()
    assert info.value.version == F.FORMAT_VERSION + 1
    assert info.value.path == path
    assert "upgrade" in str(info.value)
    assert read_header(path) == {}


def test_a_newer_format_version_is_refused_by_run_reader(tmp_path):
    run_dir = tmp_path / "p" / "r-00000000"
    run_dir.mkdir(parents=True)
    write(run_dir / "events.r0.s0.log", F.FILE_HEADER.pack(b"NBEV", F.FORMAT_VERSION + 1, 0))
    with pytest.raises(nb.FormatVersionError):
        nb.RunReader(str(run_dir)).scalars()


def test_a_file_that_is_not_an_event_log_is_skipped_with_a_warning(tmp_path):
    junk = b"PK\x03\x04 this is a zip file" * 10
    lf = LogFile(write(tmp_path / "f.log", junk))
    with pytest.warns(nb.DamagedLogWarning, match="not an nb event log") as seen:
        lf.poll()
    assert len(lf.points()) == 0
    assert lf.skipped_bytes == len(junk)
    (w,) = seen
    assert (w.message.start, w.message.stop, w.message.lost) == (0, len(junk), True)


def test_corruption_is_reported_by_run_reader_sessions(tmp_path):
    run_dir = tmp_path / "p" / "r-00000000"
    run_dir.mkdir(parents=True)
    damaged = bytearray(B)
    damaged[20] ^= 4
    write(run_dir / "events.r0.s0.log", PREFIX + A + bytes(damaged) + C + END)
    r = nb.RunReader(str(run_dir))
    assert r.scalars()["step"].to_list() == list(range(10)) + list(range(20, 30))
    (s,) = r.sessions()
    assert (s["skipped_bytes"], s["pending_bytes"], s["points"]) == (len(B), 0, 20)


def test_first_step_ignores_system_metrics(tmp_path):
    data = (
        F.file_header() + session_frame()
        + tags_frame((0, F.KIND_SYSTEM, "system/cpu_percent"), (1, F.KIND_SCALAR, "loss"))
        + points_frame([0, 1], tag=0) + points_frame([7, 8], tag=1)
    )
    lf = LogFile(write(tmp_path / "f.log", data))
    lf.poll()
    assert lf.first_step == 7


def test_read_header(tmp_path):
    path = write(tmp_path / "f.log", PREFIX + A)
    assert read_header(path)["wall_start"] == 1000.0
    assert read_header(write(tmp_path / "g.log", b"junk")) == {}
    assert read_header(write(tmp_path / "h.log", PREFIX[:20])) == {}


FULL = PREFIX + A + B + C + END
ALL_STEPS = set(range(30))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    start=st.integers(len(F.file_header()), len(FULL) - 1),
    junk=st.binary(min_size=1, max_size=4),
    cut=st.integers(0, 40),
)
def test_damage_never_crashes_and_never_invents_points(tmp_path, start, junk, cut):
    data = bytearray(FULL)
    data[start : start + len(junk)] = junk  # overwrite up to 4 bytes: crc32 catches it
    data = bytes(data[: len(data) - cut])
    lf = LogFile(write(tmp_path / "fuzz.log", data))
    lf.poll()
    pts = lf.points()
    steps = pts["step"].tolist()
    assert set(steps) <= ALL_STEPS
    assert len(steps) == len(set(steps))
    assert pts["value"].tolist() == [s + 0.5 for s in steps]


# -- files are read, never mapped (a mapped page of a truncated file is a SIGBUS) ---------

BIG = b"".join(points_frame(range(i, i + 40_000)) for i in range(0, 200_000, 40_000))  # ~4.6 MiB


def mapped(lf):
    import mmap

    return any(isinstance(c.obj, mmap.mmap) for c in lf.chunks)


@pytest.mark.parametrize(
    "tail",
    [END, b"", END[:-1], END[:-1] + b"x", END + points_frame([7])],
    ids=["closed", "no-end", "torn-end", "damaged-end", "frame-after-end"],
)
def test_a_large_file_is_read_not_mapped_and_decodes_the_same(tmp_path, tail):
    lf = LogFile(write(tmp_path / "f.log", PREFIX + BIG + tail))
    lf.poll()
    assert lf.chunks and not mapped(lf)
    assert steps_of(lf)[:200_000] == list(range(200_000))


def test_a_closed_file_written_by_nblog_is_read_not_mapped(tmp_path):
    run = nb.init("p", run_id="mapped", root=str(tmp_path), system=False, _environ={})
    for step in range(200_000):
        run.add_scalar("loss", step * 0.5, step=step)
    run.finish()
    lf = LogFile(str(tmp_path / "p" / "mapped" / "events.r0.s0.log"))
    lf.poll()
    assert not mapped(lf)
    assert lf.points()["value"].tolist() == [s * 0.5 for s in range(200_000)]
