"""Fuzzing the event-log readers with Hypothesis (SPEC §7: readers tolerate torn tails,
unknown record types and corrupted blocks — never crash, never return wrong values
silently; man 5 nb-format: skipped bytes are counted, a header never makes a reader
allocate the length it declares).

A real run is logged once (scalars, a timer, text, images, histograms, several
frames); each example damages its event log and reads it with every reader nb has:
``RunReader`` (every method), ``nb show``'s overview, ``nb tail``'s ``Follower`` and
the TUI's ``LiveRun``.

- Corruption (bit flips, garbage written over or inserted, zeroed ranges,
  truncation): no exception, every row read is one that was written (checksums),
  no row twice, and when rows are missing the session says why: skipped or pending
  bytes (or the file was cut at a frame boundary, which is what an unfinished file
  looks like).
- Hostile frames with valid checksums (unknown types, huge declared lengths, tag ids
  up to 2**32-1, deeply nested or non-object JSON, invalid UTF-8, lone surrogates,
  references far past the media pack): no exception, no hang (a deadline), and no
  allocation anywhere near a declared size (tracemalloc peak).

``NB_HARDENING_FULL=1`` runs ten times more examples.
"""

from __future__ import annotations

import json
import math
import os
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
from nblog._errors import FormatVersionError
from nblog.format import _format as F
from nblog.format._pack import BlobError
from nblog.reader._answers.overview import overview
from nblog.reader._views.live import LiveRun
from nblog.reader._views.tail import Follower

EXAMPLES = 1500 if FULL else 150
ALLOC_LIMIT = 64 << 20  # bytes: far below every length a hostile header declares
FUZZ = settings(max_examples=EXAMPLES, deadline=5000, derandomize=not FULL,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# -- the run every example starts from --------------------------------------------------


def value(tag_index: int, step: int) -> float:
    return step * 3.0 + tag_index + 0.25


TAGS = ["a", "grp/b", "ünï code"]


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Base:
    root = tmp_path_factory.mktemp("fuzzbase") / "runs"
    run = nb.init("fz", run_id="fz-00000000", root=root, system=False, flush_interval=60, _environ={})
    for step in range(120):
        run.add_scalar({tag: value(i, step) for i, tag in enumerate(TAGS)}, step=step)
        with run.timer("t"):
            pass
        if step % 10 == 0:
            run.add_text("notes", f"step {step}: ✓ \x1b[31m", step=step)
        if step % 40 == 0:
            run.add_image("img", np.full((3, 5, 3), step, np.uint8), step=step)
            run.add_histogram("h", np.arange(step + 10, dtype=float), step=step, bins=4)
        if step % 15 == 14:
            run.flush()  # several POINTS frames
    run.finish()
    run_dir = Path(run.dir)
    truth = read_all(run_dir)
    assert truth["error"] is None and truth["scalars"] and truth["text"] and truth["media"]
    return Base({"dir": run_dir, "log": (run_dir / "events.r0.s0.log").read_bytes(),
                 "pack": (run_dir / "media.r0.pack").read_bytes(), "truth": truth})


class Base(dict):
    def __repr__(self) -> str:  # short, for Hypothesis' reports
        return "<base run>"


def read_all(run_dir: Path) -> dict:
    """Everything every reader returns; ``error`` is the exception a reader raised."""
    out: dict = {"error": None, "scalars": [], "timers": [], "text": [], "media": [], "sessions": []}
    try:
        r = nb.RunReader(run_dir)
        out["sessions"] = r.sessions(0)
        out["scalars"] = r.scalars(include_hidden=True)[["session", "step", "tag", "value"]].rows()
        out["timers"] = r.timers(include_hidden=True)[["session", "step", "tag"]].rows()
        out["text"] = r.text(include_hidden=True)[["session", "step", "tag", "text"]].rows()
        md = r.media(include_hidden=True)
        out["media"] = md[["session", "step", "tag", "offset", "length"]].rows()
        out["blobs"] = {}
        for row in md.iter_rows(named=True):
            try:
                out["blobs"][(row["offset"], row["length"])] = r.media_bytes(row)
            except BlobError:
                pass
        try:
            r.histograms(include_hidden=True)
        except (BlobError, ValueError):  # a blob that fails its checks: said, never wrong
            pass
        r.tags(kind=None)
        r.timer_stats()
        r.system()
        r.machines()
        overview(r)
        Follower(str(run_dir)).poll(last=10_000)
        live = LiveRun(run_dir)
        for rank in live.ranks():
            for kind in ("scalar", "timer", "system"):
                live.series(rank, live.tags(rank, kind), kind)
            live.text(rank)
            live.sessions(rank)
        live.machines()
        live.refresh()
    except FormatVersionError as err:
        out["error"] = err
    return out


def damaged_run(base: dict, log: bytes, pack: bytes | None = None) -> tuple[tempfile.TemporaryDirectory, Path]:
    tmp = tempfile.TemporaryDirectory(prefix="nbfuzz")
    d = Path(tmp.name) / "fz" / "fz-00000000"
    d.mkdir(parents=True)
    shutil.copy(base["dir"] / "run.json", d / "run.json")
    (d / "events.r0.s0.log").write_bytes(log)
    (d / "media.r0.pack").write_bytes(base["pack"] if pack is None else pack)
    return tmp, d


def frame_ends(log: bytes) -> list[int]:
    """Offsets where the intact file's frames end (a cut there looks unfinished, not torn)."""
    ends, pos = [F.FILE_HEADER.size], F.FILE_HEADER.size
    while pos + F.FRAME_HEADER_SIZE <= len(log):
        _m, _k, length, _c, _h = F.FRAME_HEADER.unpack_from(log, pos)
        pos += F.FRAME_HEADER_SIZE + length
        ends.append(pos)
    return ends


def same_value(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def subset(rows: list, truth: list) -> None:
    left = list(truth)
    for row in rows:
        match = next((i for i, t in enumerate(left) if len(t) == len(row) and all(map(same_value, t, row))), None)
        assert match is not None, f"a row that was never written (or twice): {row}"
        del left[match]


# -- corruption --------------------------------------------------------------------------

damage = st.one_of(
    st.tuples(st.just("flip"), st.floats(0, 1, exclude_max=True), st.integers(0, 7)),
    st.tuples(st.just("garbage"), st.floats(0, 1, exclude_max=True), st.binary(min_size=1, max_size=64)),
    st.tuples(st.just("insert"), st.floats(0, 1), st.binary(min_size=1, max_size=64)),
    st.tuples(st.just("zero"), st.floats(0, 1, exclude_max=True), st.integers(1, 4096)),
    st.tuples(st.just("truncate"), st.floats(0, 1, exclude_max=True)),
)


def apply(log: bytes, ops) -> tuple[bytes, bool, bool]:
    """The damaged bytes, whether they were only truncated, whether they were cut at all."""
    data = bytearray(log)
    only_cut, cut = True, False
    for op in ops:
        pos = int(op[1] * len(data)) if data else 0
        if op[0] == "flip" and data:
            data[pos] ^= 1 << op[2]
        elif op[0] == "garbage" and data:
            data[pos : pos + len(op[2])] = op[2][: len(data) - pos]
        elif op[0] == "insert":
            data[pos:pos] = op[2]
        elif op[0] == "zero" and data:
            n = min(op[2], len(data) - pos)
            data[pos : pos + n] = bytes(n)
        elif op[0] == "truncate":
            del data[pos:]
            cut = True
            continue
        only_cut = False
    return bytes(data), only_cut, cut


@FUZZ
@given(ops=st.lists(damage, min_size=1, max_size=4))
def test_a_damaged_event_log_reads_only_what_was_written_and_says_what_it_skipped(base, ops):
    log, only_cut, cut = apply(base["log"], ops)
    tmp, d = damaged_run(base, log)
    with tmp:
        got = read_all(d)
    truth = base["truth"]
    if got["error"] is not None:  # only a version field made newer is refused
        assert isinstance(got["error"], FormatVersionError)
        assert struct.unpack_from("<H", log, 4)[0] > F.FORMAT_VERSION
        return
    for kind in ("scalars", "timers", "text", "media"):
        subset(got[kind], truth[kind])
    for key, blob in got["blobs"].items():  # the pack is intact: every reference read is exact
        assert blob == truth["blobs"][key]
    missing = sum(len(truth[k]) - len(got[k]) for k in ("scalars", "timers", "text", "media"))
    (s,) = got["sessions"] or [{"skipped_bytes": 0, "pending_bytes": 0}]
    if missing:
        explained = s["skipped_bytes"] > 0 or s["pending_bytes"] > 0
        if only_cut:
            explained |= len(log) in frame_ends(base["log"]) or len(log) < F.FILE_HEADER.size
        elif cut:  # damaged, then cut: the cut may have taken the damage with it
            explained = True
        assert explained, (s, missing)
    if only_cut:  # a cut file is a prefix: nothing skipped, the torn tail pending
        assert s["skipped_bytes"] == 0
        for kind in ("scalars", "timers", "text", "media"):
            assert got[kind] == truth[kind][: len(got[kind])]


# -- hostile frames with valid checksums --------------------------------------------------


def framed(kind: int, payload: bytes, length: int | None = None) -> bytes:
    """A frame whose header checksums pass; ``length`` may lie about the payload."""
    head = struct.pack("<3sBII", F.FRAME_MAGIC, kind, len(payload) if length is None else length,
                       zlib.crc32(payload))
    return head + struct.pack("<I", zlib.crc32(head)) + payload


u32 = st.integers(0, 2**32 - 1)
u64 = st.integers(0, 2**64 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-(10**30), 10**30), st.floats(), st.text(max_size=20))
json_value = st.recursive(json_leaf, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)


@st.composite
def hostile_frame(draw) -> bytes:
    kind = draw(st.sampled_from(["unknown", "huge", "tags", "points", "text", "media", "json", "nested", "surrogate",
                                 "bigint", "raw"]))
    if kind == "unknown":
        return framed(draw(st.integers(8, 255) | st.just(0)), draw(st.binary(max_size=64)))
    if kind == "huge":  # declares far more than the file holds
        return framed(draw(st.sampled_from(range(1, 8))), draw(st.binary(max_size=16)),
                      length=draw(st.sampled_from([F.MAX_FRAME_LENGTH, F.MAX_FRAME_LENGTH - 1, 2**32 - 1, 10**6])))
    if kind == "tags":
        defs = b""
        for _ in range(draw(st.integers(1, 4))):
            name = draw(st.binary(max_size=12) | st.text(max_size=12).map(lambda s: s.encode("utf-8", "surrogatepass")))
            n = draw(st.sampled_from([len(name), 2**32 - 1, len(name) + 1]))
            defs += struct.pack("<IBI", draw(u32 | st.integers(0, 8)), draw(st.integers(0, 255)), n) + name
        return framed(F.FRAME_TAGS, defs)
    if kind == "points":
        n = draw(st.integers(0, 8))
        payload = b"".join(struct.pack("<qdII", draw(i64), draw(st.floats()), draw(u32 | st.integers(0, 8)), draw(u32))
                           for _ in range(n))
        return framed(F.FRAME_POINTS, payload + draw(st.binary(max_size=23)))
    if kind == "text":
        body = draw(st.binary(max_size=16))
        n = draw(st.sampled_from([len(body), 2**32 - 1, len(body) + 5]))
        return framed(F.FRAME_TEXT, struct.pack("<qIII", draw(i64), draw(st.integers(0, 8)), draw(u32), n) + body)
    if kind == "media":
        meta = json.dumps(draw(json_value)).encode()
        if draw(st.booleans()):
            meta = json.dumps({"kind": draw(st.sampled_from(["image", "histogram", "audio", 3])),
                               "format": "png", "width": draw(i64), "caption": draw(json_value)}).encode()
        n = draw(st.sampled_from([len(meta), 2**32 - 1]))
        return framed(F.FRAME_MEDIA, struct.pack("<qIIQQI", draw(i64), draw(st.integers(0, 8)), draw(u32),
                                                 draw(u64), draw(u64 | st.just(2**40)), n) + meta)
    if kind == "json":
        return framed(draw(st.sampled_from([F.FRAME_SESSION, F.FRAME_STATS, F.FRAME_END])),
                      json.dumps(draw(json_value)).encode())
    if kind == "nested":
        depth = draw(st.sampled_from([100, 5000, 100_000]))
        body = ("[" * depth + "]" * depth) if draw(st.booleans()) else ('{"a":' * depth + "1" + "}" * depth)
        target = draw(st.sampled_from([F.FRAME_SESSION, F.FRAME_STATS, F.FRAME_END, F.FRAME_MEDIA]))
        if target == F.FRAME_MEDIA:
            raw = body.encode()
            return framed(target, struct.pack("<qIIQQI", 0, 0, 0, 28, 10, len(raw)) + raw)
        return framed(target, body.encode())
    if kind == "surrogate":  # JSON may escape a lone surrogate that UTF-8 cannot hold
        lone = '"\\ud800x"'
        choice = draw(st.sampled_from(["stats", "session", "media", "text", "tag"]))
        if choice == "stats":
            return framed(F.FRAME_STATS, ('{"ms":1,"machine":{"hostname":' + lone + '}}').encode())
        if choice == "session":
            return framed(F.FRAME_SESSION, ('{"host":' + lone + ',"local_rank":0,"wall_start":0}').encode())
        if choice == "media":
            raw = ('{"kind":"image","format":"png","caption":' + lone + "}").encode()
            return framed(F.FRAME_MEDIA, struct.pack("<qIIQQI", 0, 0, 0, 28, 10, len(raw)) + raw)
        raw = "\ud800".encode("utf-8", "surrogatepass")
        if choice == "text":
            return framed(F.FRAME_TEXT, struct.pack("<qIII", 0, 0, 0, len(raw)) + raw)
        return framed(F.FRAME_TAGS, struct.pack("<IBI", 0, 0, len(raw)) + raw)
    if kind == "bigint":
        return framed(F.FRAME_STATS, b'{"ms":' + b"9" * 5000 + b"}")
    return draw(st.binary(min_size=1, max_size=64))


@FUZZ
@given(frames=st.lists(st.tuples(st.floats(0, 1), hostile_frame()), min_size=1, max_size=4))
def test_hostile_frames_with_valid_checksums_never_crash_hang_or_allocate_their_declared_size(base, frames):
    log = bytearray(base["log"])
    ends = frame_ends(base["log"])
    for where, frame in frames:  # between two frames, or at the end
        pos = ends[int(where * (len(ends) - 1))]
        log[pos:pos] = frame
    tmp, d = damaged_run(base, bytes(log))
    with tmp:
        tracemalloc.start()
        try:
            got = read_all(d)
            _size, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert got["error"] is None
    assert peak < ALLOC_LIMIT, f"a read allocated {peak >> 20} MiB"
    for key, blob in got["blobs"].items():  # a reference read back is always a verified blob
        assert blob == base["truth"]["blobs"].get(key, blob) or key not in base["truth"]["blobs"]


def test_an_event_log_that_is_not_one_or_is_empty_reads_as_nothing(base):
    for log in (b"", b"NBE", b"\0" * 100, os.urandom(5000), b"NBEV\x01\x00\x00\x00", b"NBEV\x01\x00\x00\x00NBF"):
        tmp, d = damaged_run(base, log)
        with tmp:
            got = read_all(d)
        assert got["error"] is None and not got["scalars"] and not got["text"]


def test_points_whose_tag_definition_is_corrupt_are_skipped_never_shown_under_another_tag(tmp_path):
    """Tag "b" (id 2) is defined in a later TAGS frame than "a" and "c" (ids 0, 1); a
    bit flip in that frame makes it unreadable: b's points have no name any more and
    must not be read as another tag by any reader (they were shown as "c" by the TUI's
    LiveRun: a tag id past its table was clamped onto the last entry)."""
    run = nb.init("fz", run_id="tagflip-00000000", root=tmp_path / "runs", system=False, flush_interval=60,
                  _environ={})
    for step in range(10):
        run.add_scalar({"a": float(step), "c": 0.5}, step=step)
    run.flush()
    for step in range(10, 20):
        run.add_scalar({"a": float(step), "b": -float(step), "c": 0.5}, step=step)
    run.finish()
    path = Path(run.dir) / "events.r0.s0.log"
    log = bytearray(path.read_bytes())
    tags_frames = [p for p in frame_ends(bytes(log))[:-1] if log[p + 3] == F.FRAME_TAGS]
    assert len(tags_frames) == 4  # each definition written twice (F.DOUBLED_FRAMES)
    for at in tags_frames[2:]:  # both copies of b's definition: each payload fails its checksum
        log[at + F.FRAME_HEADER_SIZE] ^= 0x01
    path.write_bytes(bytes(log))

    want = [(s, tag, v) for s in range(20) for tag, v in (("a", float(s)), ("c", 0.5))]
    r = nb.RunReader(run.dir)
    with pytest.warns(nb.DamagedLogWarning, match="10 points of the tags it defined left out"):
        assert r.scalars()[["step", "tag", "value"]].rows() == want
    (s0,) = r.sessions()
    assert s0["skipped_bytes"] > 0 and s0["points"] == 40
    assert [(d["frame"], d["points"], d["lost"]) for d in r.damage()] == [("tag definitions", None, True),
                                                                          ("tag definitions", 10, True)]
    live = LiveRun(run.dir)
    series = live.series(0, ["a", "c"], "scalar")
    assert series["a"].x("step").tolist() == list(range(20))
    assert series["c"].x("step").tolist() == list(range(20))
    events = Follower(run.dir).poll(last=1000)
    assert [(e.step, e.tag, e.value) for e in events if e.kind == "scalar"] == want


def _media_ref(offset: int, length: int, meta: bytes = b'{"kind":"image","format":"png"}', tid: int = 0) -> bytes:
    return struct.pack("<qIIQQI", 0, tid, 0, offset, length, len(meta)) + meta


HOSTILE = {  # each found a crash or a huge allocation before its fix (see the report)
    "json nested 100000 deep (RecursionError)": [framed(F.FRAME_STATS, b"[" * 100_000 + b"]" * 100_000)],
    "media metadata nested 100000 deep": [framed(F.FRAME_MEDIA, _media_ref(28, 10, b"[" * 100_000 + b"]" * 100_000))],
    "tag name with a lone surrogate (no Polars string)": [
        framed(F.FRAME_TAGS, struct.pack("<IBI", 7, F.KIND_SCALAR, 3) + "\ud800".encode("utf-8", "surrogatepass")),
        framed(F.FRAME_POINTS, struct.pack("<qdII", 1, 1.0, 7, 0))],
    "text with a lone surrogate": [
        framed(F.FRAME_TEXT, struct.pack("<qIII", 0, 4, 0, 3) + "\ud800".encode("utf-8", "surrogatepass"))],
    "media caption with an escaped lone surrogate": [
        framed(F.FRAME_MEDIA, _media_ref(28, 10, b'{"kind":"image","format":"png","caption":"\\ud800"}', tid=5))],
    "tag id 2**32-1 (a table of 2**32 entries)": [
        framed(F.FRAME_TAGS, struct.pack("<IBI", 2**32 - 1, F.KIND_SCALAR, 1) + b"z"),
        framed(F.FRAME_POINTS, struct.pack("<qdII", 1, 1.0, 2**32 - 1, 0))],
    "media reference at offset 2**64-1": [framed(F.FRAME_MEDIA, _media_ref(2**64 - 1, 10, tid=5))],
    "media reference of 2**40 bytes": [framed(F.FRAME_MEDIA, _media_ref(28, 2**40, tid=5))],
    "frame declaring 1 GiB at the end": [framed(F.FRAME_POINTS, b"", length=F.MAX_FRAME_LENGTH)],
    "STATS with a 5000-digit number": [framed(F.FRAME_STATS, b'{"ms":' + b"9" * 5000 + b"}")],
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_each_hostile_frame_class(base, case):
    tid = {name: t for t, (_k, name) in _tags_of(base["log"]).items()}
    assert tid.get("img") == 5 and tid.get("notes") == 4, tid  # the ids the cases use
    log = base["log"] + b"".join(HOSTILE[case])
    pack = base["pack"]
    if "2**40" in case:  # and a pack whose blob header agrees with the reference
        pack = pack + struct.pack("<3sBQI", b"NBB", 1, 2**40, 0)
        pack += struct.pack("<I", zlib.crc32(pack[-16:]))
        log = base["log"] + framed(F.FRAME_MEDIA, _media_ref(len(pack), 2**40, tid=5))
    tmp, d = damaged_run(base, log, pack)
    with tmp:
        tracemalloc.start()
        try:
            got = read_all(d)
            _size, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert got["error"] is None
    assert peak < ALLOC_LIMIT, f"a read allocated {peak >> 20} MiB"
    subset(got["scalars"], base["truth"]["scalars"])  # nothing hostile read as a value
    subset(got["text"], base["truth"]["text"])
    assert len(got["scalars"]) == len(base["truth"]["scalars"])


def _tags_of(log: bytes) -> dict:
    from nblog.reader._file.logfile import LogFile

    with tempfile.NamedTemporaryFile(suffix=".log") as f:
        f.write(log)
        f.flush()
        lf = LogFile(f.name)
        lf.poll()
        return lf.tags
