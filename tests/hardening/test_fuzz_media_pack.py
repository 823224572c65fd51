"""Fuzzing the media pack (``media.r<rank>.pack``) with Hypothesis.

Readers reach blobs only through references and verify both checksums: whatever
happens to the pack (bit flips, garbage, inserted bytes, zeroed ranges, truncation,
blob headers that declare 2**40 bytes), every media call returns the exact bytes and
image that were logged, or raises ``BlobError`` for that record, and
``RunReader.histograms()`` returns exactly the histograms whose blobs read back —
never another exception, never other bytes, never an allocation of a declared size.

A later session appends to a damaged pack: its media are either stored and read back
exactly, or dropped and counted (a pack whose header is not a pack's is refused,
a header torn by kill -9 is rewritten) — the session itself never fails.
"""

from __future__ import annotations

import io
import shutil
import struct
import tempfile
import tracemalloc
import zlib
from pathlib import Path

import numpy as np
import pytest
from hardkit import FULL
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nblog as nb
from nblog.format._pack import BlobError

EXAMPLES = 1000 if FULL else 100
FUZZ = settings(max_examples=EXAMPLES, deadline=5000, derandomize=not FULL,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
ALLOC_LIMIT = 64 << 20


class Base(dict):
    def __repr__(self) -> str:
        return "<base run>"


def image(step: int) -> np.ndarray:
    return ((np.arange(8 * 8 * 3) * 7 + step) % 256).astype(np.uint8).reshape(8, 8, 3)


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Base:
    root = tmp_path_factory.mktemp("packbase") / "runs"
    run = nb.init("pk", run_id="pk-00000000", root=root, system=False, flush_interval=60, _environ={})
    for step in range(0, 40, 5):
        run.add_image("img", image(step), step=step)
        run.add_histogram("h", np.linspace(0, step + 1, 50), step=step, bins=5)
        run.add_audio("snd", np.sin(np.arange(200) / (step + 1)), step=step, sample_rate=8000)
        run.add_scalar("x", float(step), step=step)
    run.finish()
    d = Path(run.dir)
    r = nb.RunReader(d)
    md = r.media()
    blobs = {(row["offset"], row["length"]): r.media_bytes(row) for row in md.iter_rows(named=True)}
    assert len(blobs) == 24
    return Base(dir=d, pack=(d / "media.r0.pack").read_bytes(), rows=md.rows(), blobs=blobs,
                hist=r.histograms().rows())


def run_with_pack(base: Base, pack: bytes) -> tuple[tempfile.TemporaryDirectory, Path]:
    tmp = tempfile.TemporaryDirectory(prefix="nbpack")
    d = Path(tmp.name) / "pk" / "pk-00000000"
    shutil.copytree(base["dir"], d)
    (d / "media.r0.pack").write_bytes(pack)
    return tmp, d


def read_media(d: Path, base: Base) -> dict:
    """Check every record against what was logged; return how many read / failed."""
    r = nb.RunReader(d)
    md = r.media()
    assert md.rows() == base["rows"]  # the references live in the event log: untouched
    ok = failed = 0
    readable = set()  # (session, step, tag) of the histograms whose blob reads back
    for row in md.iter_rows(named=True):
        try:
            blob = r.media_bytes(row)
        except BlobError:
            failed += 1
            continue
        assert blob == base["blobs"][(row["offset"], row["length"])]
        if row["kind"] == "image":
            assert np.array_equal(np.asarray(r.image(row)), image(row["step"]))
        if row["kind"] == "histogram":
            readable.add((row["session"], row["step"], row["tag"]))
        ok += 1
    # every readable histogram, exactly as logged; a damaged one leaves out only itself
    assert r.histograms().rows() == [h for h in base["hist"] if (h[1], h[2], h[3]) in readable]
    return {"ok": ok, "failed": failed}


damage = st.one_of(
    st.tuples(st.just("flip"), st.floats(0, 1, exclude_max=True), st.integers(0, 7)),
    st.tuples(st.just("garbage"), st.floats(0, 1, exclude_max=True), st.binary(min_size=1, max_size=64)),
    st.tuples(st.just("insert"), st.floats(0, 1), st.binary(min_size=1, max_size=64)),
    st.tuples(st.just("zero"), st.floats(0, 1, exclude_max=True), st.integers(1, 4096)),
    st.tuples(st.just("truncate"), st.floats(0, 1, exclude_max=True)),
    st.tuples(st.just("huge"), st.floats(0, 1, exclude_max=True), st.sampled_from([2**40, 2**63 - 1, 2**64 - 1])),
)


def apply(pack: bytes, ops, blob_starts: list[int]) -> bytes:
    data = bytearray(pack)
    for op in ops:
        pos = int(op[1] * len(data)) if data else 0
        if op[0] == "flip" and data:
            data[pos] ^= 1 << op[2]
        elif op[0] == "garbage" and data:
            data[pos : pos + len(op[2])] = op[2][: len(data) - pos]
        elif op[0] == "insert":
            data[pos:pos] = op[2]
        elif op[0] == "zero" and data:
            data[pos : pos + op[2]] = bytes(min(op[2], len(data) - pos))
        elif op[0] == "truncate":
            del data[pos:]
        elif op[0] == "huge":  # a blob header with valid checksums that declares a huge payload
            start = blob_starts[int(op[1] * len(blob_starts))]
            if start + 20 <= len(data):
                head = struct.pack("<3sBQI", b"NBB", data[start + 3], op[2], 0)
                data[start : start + 20] = head + struct.pack("<I", zlib.crc32(head))
    return bytes(data)


@FUZZ
@given(ops=st.lists(damage, min_size=1, max_size=4))
def test_a_damaged_pack_gives_the_logged_bytes_or_blob_error(base, ops):
    starts = sorted(off - 20 for off, _n in base["blobs"])
    pack = apply(base["pack"], ops, starts)
    tmp, d = run_with_pack(base, pack)
    with tmp:
        tracemalloc.start()
        try:
            got = read_media(d, base)
            _size, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < ALLOC_LIMIT, f"{peak >> 20} MiB"
    assert got["ok"] + got["failed"] == len(base["rows"])
    if pack == base["pack"]:
        assert got["failed"] == 0


@settings(max_examples=max(10, EXAMPLES // 5), deadline=10000, derandomize=not FULL,
          suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(damage, min_size=1, max_size=3))
def test_a_later_session_appends_to_a_damaged_pack_or_drops_and_counts(base, ops):
    starts = sorted(off - 20 for off, _n in base["blobs"])
    pack = apply(base["pack"], ops, starts)
    tmp, d = run_with_pack(base, pack)
    with tmp:
        run = nb.init("pk", run_id="pk-00000000", root=d.parent.parent, resume="auto", system=False,
                      flush_interval=60, _environ={})
        for step in range(100, 103):
            run.add_image("img", image(step), step=step)
        run.finish()
        r = nb.RunReader(d)
        s1 = r.sessions()[-1]
        new = r.media("img").filter(r.media("img")["session"] == s1["session"])
        dropped = s1["dropped"].get("write_error", 0)
        assert len(new) + dropped == 3, (len(new), s1["dropped"])
        for row in new.iter_rows(named=True):
            assert np.array_equal(np.asarray(r.image(row)), image(row["step"]))
        if pack[:8] == base["pack"][:8]:  # a pack header intact: it is appended to
            assert len(new) == 3


def test_a_pack_header_torn_by_kill_9_is_rewritten_and_a_foreign_file_is_refused(base):
    for pack, appended in ((b"", True), (b"NBM", True), (b"\x89PNG\r\n\x1a\n not a pack", False),
                           (b"NBMP\x09\x00\x00\x00", False)):
        tmp, d = run_with_pack(base, pack)
        with tmp:
            run = nb.init("pk", run_id="pk-00000000", root=d.parent.parent, resume="auto", system=False,
                          _environ={})
            run.add_image("img", image(200), step=200)
            run.finish()
            r = nb.RunReader(d)
            new = r.media().filter(r.media()["step"] == 200)
            assert len(new) == int(appended), pack
            if appended:
                assert np.array_equal(np.asarray(r.image(new.row(0, named=True))), image(200))
            else:
                assert r.sessions()[-1]["dropped"]["write_error"] == 1
                assert (d / "media.r0.pack").read_bytes() == pack  # someone else's file is never touched


def test_read_blob_never_reads_past_the_end(base):
    """``read_blob`` on a pack whose header says 2**40 bytes and a reference that agrees."""
    from nblog.format._pack import read_blob

    head = struct.pack("<3sBQI", b"NBB", 1, 2**40, 0)
    pack = base["pack"][:8] + head + struct.pack("<I", zlib.crc32(head)) + b"x" * 100
    tracemalloc.start()
    try:
        with pytest.raises(BlobError, match="missing or torn"):
            read_blob(io.BytesIO(pack), 28, 2**40)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < ALLOC_LIMIT
