"""RunReader.scalars builds its frame with Polars alone from the COLUMNS frames as read
(nblog.reader._file.columns, through an Arrow IPC stream, nblog.reader._file.ipc): the same
rows, order and values, bit for bit, as the numpy path (RunReader._point_frame), which
still serves files it does not (POINTS frames, wrapped milliseconds); and a first read
in a fresh process imports no numpy.
"""

from __future__ import annotations

import io
import os
import random
import struct
import subprocess
import sys
import textwrap
import threading
import zlib

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import nblog as nb
from nblog.format import _format as F
from nblog.reader._file.columns import columns_frame
from nblog.reader._file.ipc import ipc_stream
from nblog.reader._views.reader import POINT_SCHEMA


# the shapes of tests/unit/test_columns.py
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


# tag ids of the shapes, each given a kind: scalars mostly, and some of every other kind
# (a scalar read leaves them out); ids 5, 6 and 11 are never defined (records of an
# undefined tag are left out too)
DEFS = [(tid, F.KIND_TIMER if tid % 7 == 3 else F.KIND_SYSTEM if tid % 7 == 4 else F.KIND_SCALAR, f"tag/{tid}")
        for tid in [*range(0, 5), *range(7, 11), *range(12, 14), 2, 9999, 60000, 59999, 70000, 70001, 70002]]
WALL = 1_796_157_604.991_771_7


def log_file(path: str, recs: bytes, rank: int = 0, frame_points: int = 700, kind: int = F.FRAME_COLUMNS,
             defs: list | None = None) -> None:
    """An event log holding ``recs`` (24-byte records) in frames of ``frame_points``."""
    out = [F.file_header(), F.json_frame(F.FRAME_SESSION, {"rank": rank, "wall_start": WALL}),
           F.frame(F.FRAME_TAGS, F.encode_tag_defs(sorted(set(DEFS if defs is None else defs))))]
    for i in range(0, len(recs), frame_points * F.POINT_SIZE):
        part = recs[i : i + frame_points * F.POINT_SIZE]
        out.append(F.frame(kind, F.encode_columns(part) if kind == F.FRAME_COLUMNS else part))
    with open(path, "wb") as f:
        f.write(b"".join(out))


def both(reader: nb.RunReader, **kw) -> tuple[pl.DataFrame | None, pl.DataFrame]:
    """The frame of the Polars path (None: not served) and of the numpy path."""
    tags, rank, all_ranks, hidden = kw.get("tags"), kw.get("rank", 0), kw.get("all_ranks", False), kw.get(
        "include_hidden", False)
    fast = columns_frame(reader, F.KIND_SCALAR, tags, rank, all_ranks, hidden, POINT_SCHEMA)
    return fast, reader._point_frame(F.KIND_SCALAR, tags, rank, all_ranks, hidden)


def same(a: pl.DataFrame, b: pl.DataFrame) -> None:
    assert_frame_equal(a, b, check_exact=True)  # NaN equals NaN here: the bits are compared below
    for c in ("value", "wall_time", "active_time"):
        assert struct.pack(f"<{len(a)}d", *a[c]) == struct.pack(f"<{len(b)}d", *b[c])


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("frame_points", [1, 64, 4096])
def test_each_shape_reads_as_the_numpy_path_reads_it(tmp_path, shape, frame_points):
    log_file(str(tmp_path / "events.r0.s0.log"), records(SHAPES[shape]), frame_points=frame_points)
    reader = nb.RunReader(str(tmp_path))
    for kw in ({}, {"include_hidden": True}, {"tags": ["tag/0", "tag/70001", "tag/9999", "no such"]}, {"tags": "tag/3"}):
        fast, slow = both(reader, **kw)
        assert (fast is None) == reader.files(0)[0].ms_wrapped  # a session of 24.8 days or more: numpy's
        same(reader.scalars(**kw), slow)
        if fast is not None:
            same(fast, slow)


def test_the_frame_is_what_was_logged(tmp_path):
    """Not only the two paths alike: each row is its record (the tag's name, the step,
    the value; wall time = session start + ms / 1000)."""
    recs = SHAPES["a dict of 10 per step"]
    log_file(str(tmp_path / "events.r0.s0.log"), records(recs), frame_points=333)
    df = nb.RunReader(str(tmp_path)).scalars()
    names = {tid: name for tid, kind, name in DEFS if kind == F.KIND_SCALAR}
    want = [(step, names[tid], value, WALL + ms / 1000.0, ms / 1000.0) for step, value, tid, ms in recs if tid in names]
    assert list(df.select("step", "tag", "value", "wall_time", "active_time").iter_rows()) == want
    assert df.schema == pl.Schema(POINT_SCHEMA)


@pytest.mark.parametrize("frame_points", [1, 10_000])  # 70,000 frames: numbered in 4 bytes, else in 1
def test_milliseconds_are_divided_as_numpy_divides_them(tmp_path, frame_points):
    """Every ms of a long range: Polars multiplies by the reciprocal of a constant
    divisor (0.018000000000000002 for 18 ms), the reader must divide."""
    recs = [(i, 0.0, 0, i) for i in range(70_000)]
    log_file(str(tmp_path / "events.r0.s0.log"), records(recs), frame_points=frame_points)
    df = nb.RunReader(str(tmp_path)).scalars()
    assert df["active_time"].to_list() == [ms / 1000.0 for ms in range(70_000)]
    assert df["active_time"][18] == 0.018


def test_sessions_ranks_and_hiding_read_as_the_numpy_path_reads_them(tmp_path):
    """Two ranks; rank 0 restarted twice (the later sessions hide the earlier ones'
    points from their first step on); frames of every width side by side."""
    rng_recs = {
        (0, 0): [(i, float(i), i % 3, 10 * i) for i in range(3000)],
        (0, 1): [(2000 + i, -float(i), i % 2, 5 * i) for i in range(70_000)],  # steps cross 2**16
        (0, 2): [(2500 + i, 0.5, 1, 70_000 + i) for i in range(50)],  # ms cross 2**16
        (1, 0): [(i, 1.0, 70000 + i % 3, i) for i in range(500)],  # tag ids past 2**16
    }
    for (rank, s), recs in rng_recs.items():
        log_file(str(tmp_path / f"events.r{rank}.s{s}.log"), records(recs), rank=rank, frame_points=999)
    reader = nb.RunReader(str(tmp_path))
    for kw in ({}, {"include_hidden": True}, {"all_ranks": True}, {"all_ranks": True, "include_hidden": True},
               {"rank": 1}, {"tags": ["tag/1"], "include_hidden": True}, {"tags": []}, {"rank": 7}):
        fast, slow = both(reader, **kw)
        assert fast is not None
        same(fast, slow)
        same(reader.scalars(**kw), slow)
    df = reader.scalars(include_hidden=True)
    assert df.filter(pl.col("session") == 0)["hidden"].sum() == 1000  # steps 2000-2999 of session 0


def test_a_threshold_above_the_step_base_hides_only_what_it_should(tmp_path):
    """Steps stored as 2 bytes above a base of 65,536, hidden from step 100,000 on (a
    later session's first step): the hidden column compares the steps themselves."""
    log_file(str(tmp_path / "events.r0.s0.log"), records([(65_536 + i, 1.0, 0, i) for i in range(40_000)]),
             frame_points=5000)
    log_file(str(tmp_path / "events.r0.s1.log"), records([(100_000 + i, 2.0, 0, i) for i in range(10)]))
    reader = nb.RunReader(str(tmp_path))
    for kw in ({}, {"include_hidden": True}):
        fast, slow = both(reader, **kw)
        assert fast is not None
        same(fast, slow)
    df = reader.scalars(include_hidden=True)
    assert df["hidden"].sum() == 40_000 - (100_000 - 65_536)


def test_points_frames_are_read_by_the_numpy_path(tmp_path):
    """A file of format 1 (POINTS frames): not served by the Polars path, read as before."""
    recs = SHAPES["a dict of 10 per step"]
    log_file(str(tmp_path / "events.r0.s0.log"), records(recs), kind=F.FRAME_POINTS)
    reader = nb.RunReader(str(tmp_path))
    fast, slow = both(reader)
    assert fast is None
    same(reader.scalars(), slow)
    assert len(slow) == sum(1 for _s, _v, tid, _ms in recs if tid in {0, 1, 2, 7, 8, 9, 12, 13})


def test_a_run_written_by_nblog_reads_as_the_numpy_path_reads_it(tmp_path):
    root = str(tmp_path)
    run = nb.init("p", run_name="r", root=root, system=False)
    for i in range(2000):
        run.add_scalar({"a": i * 0.5, "b/c": -i}, step=i)
        if i % 3 == 0:
            run.add_scalar("rare", 1.0 / (i + 1), step=i)
        with run.timer("t", step=i):
            pass
    run.finish()
    again = nb.init("p", run_id=run.id, resume="must", root=root, system=False)
    for i in range(1500, 1600):
        again.add_scalar("a", float(i), step=i)
    again.finish()
    reader = nb.RunReader(run.dir)
    for kw in ({}, {"include_hidden": True}, {"tags": "a"}):
        fast, slow = both(reader, **kw)
        assert fast is not None
        same(fast, slow)
    assert len(reader.scalars(tags="a")) == 1500 + 100


def test_a_first_read_imports_no_numpy(tmp_path):
    run = nb.init("p", run_name="r", root=str(tmp_path), system=False)
    for i in range(1000):
        run.add_scalar({"x": float(i), "y": 2.0 * i}, step=i)
    run.finish()
    code = textwrap.dedent(f"""
        import sys
        import nblog
        df = nblog.RunReader({run.dir!r}).scalars()
        assert len(df) == 2000 and df["value"].sum() == 3 * sum(range(1000)), df
        print(sorted(m for m in sys.modules if m == "numpy" or m.startswith("numpy.")))
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_ipc_streams_hold_every_column_type():
    cols = [("a", "u16"), ("b", "u32"), ("c", "i32"), ("d", "i64"), ("e", "f64"), ("f", "u8")]
    rows = [(0, 0, -(2**31), -(2**63), -0.0, 0), (65535, 2**32 - 1, 2**31 - 1, 2**63 - 1, float("inf"), 255),
            (7, 8, 9, 10, 1.5, 3)]
    batches = []
    for part in (rows[:1], [], rows[1:]):
        n = len(part)
        bufs = [struct.pack(f"<{n}{code}", *(r[i] for r in part)) for i, code in enumerate("HIiqdB")]
        batches.append((n, bufs))
    df = pl.read_ipc_stream(io.BytesIO(ipc_stream(cols, batches)))
    assert df.schema == pl.Schema({"a": pl.UInt16, "b": pl.UInt32, "c": pl.Int32, "d": pl.Int64, "e": pl.Float64,
                                   "f": pl.UInt8})
    assert list(df.iter_rows()) == rows
    with pytest.raises(ValueError):
        ipc_stream([("a", "u32")], [(2, [b"\0" * 4])])


def test_checksums_in_two_threads_find_what_one_thread_finds(tmp_path, monkeypatch):
    """A read of 4 MiB or more checks its payloads in two threads: the same frames are
    skipped (a damaged payload in each half, garbage between frames), the same read."""
    import nblog.reader._file.logfile as L

    frames = [F.frame(F.FRAME_COLUMNS, F.encode_columns(records([(i, float(i), 0, i // 10) for i in range(k, k + 9000)])))
              for k in range(0, 9000 * 60, 9000)]
    for k in (3, 45):  # a byte of a payload in each half
        f = bytearray(frames[k])
        f[F.FRAME_HEADER_SIZE + 100] ^= 0xFF
        frames[k] = bytes(f)
    frames.insert(20, b"garbage NB")
    path = str(tmp_path / "events.r0.s0.log")
    with open(path, "wb") as out:
        out.write(F.file_header() + F.json_frame(F.FRAME_SESSION, {"rank": 0})
                  + F.frame(F.FRAME_TAGS, F.encode_tag_defs([(0, F.KIND_SCALAR, "x")])) + b"".join(frames))
    assert os.path.getsize(path) > L._PARALLEL_CRC
    threads = set()

    class Zlib:  # zlib, noting the threads that compute checksums
        @staticmethod
        def crc32(data: memoryview) -> int:
            threads.add(threading.current_thread().name.split("_")[0])
            return zlib.crc32(data)

    monkeypatch.setattr(L, "zlib", Zlib)

    def read() -> tuple:
        lf = L.LogFile(path)
        lf.poll()
        return lf.skipped_bytes, lf.n_points, [bytes(c) for c in lf.chunks]

    two = read()
    assert "nblog-crc" in threads
    monkeypatch.setattr(L, "_PARALLEL_CRC", 1 << 62)
    threads.clear()
    one = read()
    assert threads == {"MainThread"}
    assert two == one
    assert one[0] == len(frames[3]) + len(frames[46]) + len(b"garbage NB") and one[1] == 58 * 9000
