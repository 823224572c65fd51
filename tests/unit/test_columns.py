"""COLUMNS frames (format version 2): point records stored column by column by the
writer thread, 12-16 bytes a point instead of 24; every reader decodes them, and files
of version 1 (POINTS frames only) are still read.
"""

from __future__ import annotations

import os
import random
import struct
import zlib

import pytest

import nblog as nb
from nblog.format import _format as F
from nblog.format._steps import frames as _frames
from nblog.format._steps import log_last_step
from nblog.reader._file.logfile import LogFile
from nblog.write._session import _log_record_summary


def records(points) -> bytes:
    return b"".join(F.POINT.pack(*p) for p in points)


NAN_BITS = struct.unpack("<d", b"\xff" * 8)[0]

SHAPES = {
    "one tag, consecutive steps": [(i, i * 1e-3, 0, i // 50) for i in range(5000)],
    "a dict of 10 per step": [(i // 10, 0.1 * (i % 10), 3 + i % 10, i // 500) for i in range(5000)],
    "random tags below 2**16": [(i, random.Random(i).random(), random.Random(i).randrange(60000), i) for i in range(999)],
    "tags past 2**16": [(i, 1.0, 70000 + i % 3, i) for i in range(300)],
    "steps crossing 2**16": [(65530 + i, float(i), 1, 0) for i in range(20)],
    "steps crossing 2**32": [(2**32 - 3 + i, float(i), 1, 0) for i in range(9)],
    "steps near 2**63": [(2**63 - 1 - i, -0.0, 2, 7) for i in range(5)],
    "steps going back and forth": [(i * 7919 % 1000, float(i), i % 4, i % 4) for i in range(400)],
    "ms crossing 2**16 and wrapping": [(i, 1.0, 0, (0xFFFF_FFF0 + 9 * i) & 0xFFFFFFFF) for i in range(10)],
    "one record": [(5, 2.5, 9, 17)],
    "NaN bits and infinities": [(i, (NAN_BITS, float("inf"), -float("inf"), 5e-324)[i % 4], i % 2, 0) for i in range(40)],
    "a period that does not divide the count": [(i // 3, float(i), 10 + i % 3, 0) for i in range(3001)],
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_columns_hold_exactly_the_records(shape):
    raw = records(SHAPES[shape])
    payload = F.encode_columns(raw)
    assert payload is not None
    assert F.decode_columns(payload) == raw  # byte for byte: NaN payloads too
    assert F.decode_columns(memoryview(b"x" + payload)[1:]) == raw  # at any offset of a file


def test_columns_are_at_most_16_bytes_a_point_for_the_usual_shapes():
    for shape in ("one tag, consecutive steps", "a dict of 10 per step", "random tags below 2**16"):
        n = len(SHAPES[shape])
        assert len(F.encode_columns(records(SHAPES[shape]))) <= 16 * n, shape


def test_malformed_columns_raise_value_error_only():
    rng = random.Random(3)
    good = [F.encode_columns(records(SHAPES[s])) for s in SHAPES]
    for _ in range(3000):
        data = bytearray(rng.choice(good))
        how = rng.randrange(4)
        if how == 0:  # a byte of the head
            data[rng.randrange(F.COLUMNS_HEAD.size)] = rng.randrange(256)
        elif how == 1:
            del data[rng.randrange(len(data)):]
        elif how == 2:
            data += bytes(rng.randrange(1, 40))
        else:  # a field of the head set to something odd
            field = rng.choice([(0, "<I"), (4, "<I"), (8, "B"), (9, "B"), (10, "B"), (12, "<q"), (20, "<I")])
            val = rng.choice([0, 1, 2, 3, 4, 8, 255, 2**16, 2**31, 2**32 - 1, -1, 2**62])
            try:
                struct.pack_into(field[1], data, field[0], val)
            except struct.error:
                continue
        try:
            out = F.decode_columns(bytes(data))
        except ValueError:
            continue
        assert len(out) % F.POINT_SIZE == 0


def test_a_run_is_written_in_columns_and_read_back_exactly(make_run):
    run = make_run()
    for i in range(20000):
        run.add_scalar("train/loss", i * 1e-3, step=i)
        if i % 4 == 0:
            run.add_scalar({"a": float(i), "b": -float(i)}, step=i)
    run.finish()
    path = os.path.join(run.dir, "events.r0.s0.log")
    with open(path, "rb") as f:
        data = f.read()
    kinds = [kind for kind, _payload in _frames(data, F.FILE_HEADER.size)]
    assert F.FRAME_COLUMNS in kinds and F.FRAME_POINTS not in kinds
    assert F.FILE_HEADER.unpack_from(data)[1] == F.FORMAT_VERSION == 2
    df = nb.RunReader(run.dir).scalars("train/loss")
    assert df["step"].to_list() == list(range(20000))
    assert df["value"].to_list() == [i * 1e-3 for i in range(20000)]
    assert log_last_step(path) == 19999


def test_the_first_and_last_step_scans_read_columns(make_run):
    run = make_run()
    for i in range(3, 500):
        run.add_scalar({"a": float(i), "b": 1.0}, step=i)
    run.finish()
    summary = _log_record_summary(os.path.join(run.dir, "events.r0.s0.log"))
    assert (summary["first_step"], summary["last_step"]) == (3, 499)


def test_bytes_on_disk_per_scalar_point_are_at_most_16(make_run):
    run = make_run()
    for i in range(100_000):
        run.add_scalar("train/loss", i * 1e-3, step=i)
    run.finish()
    size = sum(os.path.getsize(os.path.join(run.dir, f)) for f in os.listdir(run.dir) if f.startswith("events."))
    assert size / 100_000 <= 16


def _as_version_1(path: str) -> None:
    """Rewrite an event log as version 1 wrote it: COLUMNS frames as POINTS frames."""
    with open(path, "rb") as f:
        data = f.read()
    out = bytearray(F.FILE_HEADER.pack(F.FILE_MAGIC, 1, 0))
    for kind, payload in _frames(data, F.FILE_HEADER.size):
        if kind == F.FRAME_COLUMNS:
            kind, payload = F.FRAME_POINTS, F.decode_columns(payload)
        out += F.frame(kind, bytes(payload))
    with open(path, "wb") as f:
        f.write(out)


def test_a_file_of_format_version_1_is_still_read(make_run):
    run = make_run()
    for i in range(3000):
        run.add_scalar({"a": float(i), "b": 2.0 * i}, step=i)
    run.add_text("note", "hello", step=2999)
    run.finish()
    path = os.path.join(run.dir, "events.r0.s0.log")
    before = nb.RunReader(run.dir).scalars()
    _as_version_1(path)
    with open(path, "rb") as f:
        data = f.read()
    assert F.FILE_HEADER.unpack_from(data)[1] == 1
    assert F.FRAME_COLUMNS not in [k for k, _p in _frames(data, F.FILE_HEADER.size)]
    after = nb.RunReader(run.dir).scalars()
    assert after["value"].to_list() == before["value"].to_list()
    assert after["step"].to_list() == before["step"].to_list()
    assert after["tag"].to_list() == before["tag"].to_list()
    assert nb.RunReader(run.dir).text()["text"].to_list() == ["hello"]
    assert log_last_step(path) == 2999
    lf = LogFile(path)
    lf.poll()
    assert lf.first_step == 0 and lf.n_points == 6000


def test_a_corrupt_columns_frame_is_skipped_and_counted_not_raised(tmp_path):
    payload = bytearray(F.encode_columns(records(SHAPES["one tag, consecutive steps"])))
    payload[0] ^= 1  # n no longer fits the frame; checksums made valid again
    good = F.frame(F.FRAME_COLUMNS, F.encode_columns(records([(1, 1.0, 0, 0)])))
    bad = F.frame(F.FRAME_COLUMNS, bytes(payload))
    assert zlib.crc32(bytes(payload)) == struct.unpack_from("<I", bad, 8)[0]
    path = tmp_path / "events.r0.s0.log"
    path.write_bytes(F.file_header() + F.json_frame(F.FRAME_SESSION, {"rank": 0}) + bad + good)
    lf = LogFile(str(path))
    lf.poll()
    assert lf.skipped_bytes == len(bad)
    assert lf.n_points == 1


@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_numpy_decoder_of_readers_agrees_with_the_standard_library_one(shape):
    from nblog.reader._file.logfile import _records_of_columns

    raw = records(SHAPES[shape])
    payload = F.encode_columns(raw)
    assert bytes(_records_of_columns(memoryview(b"x" + payload)[1:])) == raw == F.decode_columns(payload)


def test_both_decoders_refuse_the_same_malformed_columns():
    from nblog.reader._file.logfile import _records_of_columns

    rng = random.Random(8)
    good = [F.encode_columns(records(SHAPES[s])) for s in SHAPES]
    for _ in range(1500):
        data = bytearray(rng.choice(good))
        data[rng.randrange(F.COLUMNS_HEAD.size)] = rng.randrange(256)
        try:
            std = F.decode_columns(bytes(data))
        except ValueError:
            std = None
        try:
            fast = bytes(_records_of_columns(memoryview(bytes(data))))
        except ValueError:
            fast = None
        assert std == fast


def test_readers_never_raise_on_hostile_columns_frames(tmp_path):
    """Checksummed COLUMNS frames holding anything: LogFile, the resume-step scan and
    the first-step scan skip what they cannot decode; nothing escapes."""
    rng = random.Random(21)
    good = [F.encode_columns(records(SHAPES[s])) for s in SHAPES]
    for i in range(300):
        data = bytearray(rng.choice(good))
        for _ in range(rng.randrange(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        if rng.random() < 0.3:
            data = data[: rng.randrange(len(data) + 1)]
        path = tmp_path / f"events.r0.s{i}.log"
        path.write_bytes(F.file_header() + F.json_frame(F.FRAME_SESSION, {"rank": 0})
                         + F.frame(F.FRAME_COLUMNS, bytes(data)))
        lf = LogFile(str(path))
        lf.poll()
        assert lf.n_points * F.POINT_SIZE == sum(len(c) for c in lf.chunks)
        log_last_step(str(path))
        _log_record_summary(str(path))


@pytest.mark.parametrize("shape", ["one tag, consecutive steps", "a dict of 10 per step", "tags past 2**16",
                                   "steps near 2**63", "ms crossing 2**16 and wrapping"])
def test_the_field_by_field_decoder_of_big_endian_machines_agrees(shape, monkeypatch):
    payload = F.encode_columns(records(SHAPES[shape]))
    monkeypatch.setattr(F, "_LITTLE", False)
    assert F.decode_columns(payload) == records(SHAPES[shape])
    assert F.encode_columns(records(SHAPES[shape])) is None  # such a machine writes POINTS
    assert F.block_packer((1, 2)) is None  # and packs dicts point by point
