"""One codec (issue 23): the file header, the frame walk and the COLUMNS layout are read
in one place (``nblog.format._walk``; ``nblog.format._format.columns_layout``), and every
decoder takes them from there: the standard library's, numpy's, the Arrow path of
``RunReader.scalars``, ``LogFile``'s record-by-record reads and the last-step scan.

- Every decoder reads every width and pattern of COLUMNS frames value for value.
- The column order is one tuple: with it changed (as a format version 3 might), the
  writer and every decoder still agree, so none of them computes an offset itself; and
  no module but the format's reads a frame, file or columns head.
- The readers that walk frames agree with ``LogFile`` on what a log holds: a damaged
  file header, the file headers each reads at all, a damaged frame skipped whole.
"""

from __future__ import annotations

import ast
import warnings
from collections import Counter
from pathlib import Path

import pytest

import nblog
from nblog.format import _format as F
from nblog.format import _steps
from nblog.format._steps import log_last_step
from nblog.reader._file.logfile import LogFile
from nblog.reader.lowlevel import read_header
from nblog.write._session import _log_record_summary

N = 50
STEPS = {2: lambda i: 5 * 65536 + 7 * i, 4: lambda i: 65530 + 3 * i, 8: lambda i: -25 + 2 * i}
MS = {2: lambda i: 3 * 65536 + 100 * i, 4: lambda i: 65500 + 10 * i}
TAGS = {"one tag": lambda i: 7, "a pattern of 3": lambda i: (4, 9, 12)[i % 3],
        "2-byte ids": lambda i: 100 + 13 * i, "4-byte ids": lambda i: 70000 + 13 * i}
COMBOS = [(s, m, t) for s in STEPS for m in MS for t in TAGS]


def points(step_w: int, ms_w: int, tags: str) -> list[tuple[int, float, int, int]]:
    return [(STEPS[step_w](i), i * 0.25 - 3.0, TAGS[tags](i), MS[ms_w](i)) for i in range(N)]


def records(pts) -> bytes:
    return b"".join(F.POINT.pack(*p) for p in pts)


def log_bytes(pts, session: dict | None = None) -> bytes:
    """An event log holding ``pts`` in one COLUMNS frame, every tag a scalar."""
    defs = sorted({(tid, F.KIND_SCALAR, f"tag/{tid}") for _s, _v, tid, _ms in pts})
    head = {"rank": 0, "session": 0, "wall_start": 0.0, **(session or {})}
    return (F.file_header() + F.doubled(F.json_frame(F.FRAME_SESSION, head))
            + F.doubled(F.frame(F.FRAME_TAGS, F.encode_tag_defs(defs)))
            + F.frame(F.FRAME_COLUMNS, F.encode_columns(records(pts))))


def each_decoder(pts, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """What each decoder reads from the COLUMNS frame of ``pts``, each as the records
    ``(step, value, tag id, ms)`` in order (or the ids and steps it gives)."""
    from nblog.reader._file.columns import columns_frame
    from nblog.reader._file.logfile import _Columns, _columns_of, _records_of_columns
    from nblog.reader._views.reader import POINT_SCHEMA

    payload = F.encode_columns(records(pts))
    assert payload is not None
    view = memoryview(b"x" + payload)[1:]  # as it lies in a file: anywhere
    out: dict[str, object] = {
        "standard library": list(F.POINT.iter_unpack(F.decode_columns(view))),
        "numpy, records": list(F.POINT.iter_unpack(bytes(_records_of_columns(view)))),
        "LogFile, record by record": list(_Columns(view).records()),
    }
    with monkeypatch.context() as m:
        m.setattr(F, "_LITTLE", False)
        out["standard library, big-endian"] = list(F.POINT.iter_unpack(F.decode_columns(view)))
    cols = _columns_of(view)
    out["numpy, columns"] = list(zip(cols["step"].tolist(), cols["value"].tolist(), cols["tag"].tolist(),
                                     cols["ms"].tolist(), strict=True))
    ids, weights = _Columns(view).tag_counts()
    out["tag counts"] = Counter(ids) if weights is None else Counter(dict(zip(ids, weights, strict=True)))
    out["last step"] = _steps.max_step([(F.FRAME_COLUMNS, view)], set())
    out["last step, a system tag left out"] = _steps.max_step([(F.FRAME_COLUMNS, view)], {pts[0][2]})
    run_dir = tmp_path / "p" / f"r-{len(list(tmp_path.glob('p/*'))):08d}"
    run_dir.mkdir(parents=True)
    (run_dir / "events.r0.s0.log").write_bytes(log_bytes(pts))
    reader = nblog.RunReader(str(run_dir))
    arrow = columns_frame(reader, F.KIND_SCALAR, None, 0, False, False, POINT_SCHEMA)
    assert arrow is not None  # the Arrow path served it
    out["Arrow"] = [(s, v, int(t.split("/")[1]), round(w * 1000))
                    for s, v, t, w in arrow.select("step", "value", "tag", "wall_time").iter_rows()]
    return out


def expected(pts) -> dict[str, object]:
    steps = [s for s, *_ in pts]
    return {
        **{k: pts for k in ("standard library", "numpy, records", "LogFile, record by record",
                             "standard library, big-endian", "numpy, columns", "Arrow")},
        "tag counts": Counter(tid for _s, _v, tid, _ms in pts),
        "last step": max(steps),
        "last step, a system tag left out": max((s for s, _v, t, _ms in pts if t != pts[0][2]), default=None),
    }


@pytest.mark.parametrize(("step_w", "ms_w", "tags"), COMBOS)
def test_every_decoder_reads_every_width_and_pattern_value_for_value(tmp_path, monkeypatch, step_w, ms_w, tags):
    pts = points(step_w, ms_w, tags)
    lay = F.columns_layout(F.encode_columns(records(pts)))
    tag_w = 0 if lay.pattern else lay.tag.width
    assert (lay.step.width, lay.ms.width, lay.pattern, tag_w) == (
        step_w, ms_w, {"one tag": 1, "a pattern of 3": 3}.get(tags, 0), {"2-byte ids": 2, "4-byte ids": 4}.get(tags, 0))
    assert each_decoder(pts, tmp_path, monkeypatch) == expected(pts)


ORDERS = [("tag", "ms", "step", "value"), ("step", "value", "tag", "ms")]


@pytest.mark.parametrize("order", ORDERS)
def test_with_the_columns_in_another_order_the_writer_and_every_decoder_still_agree(tmp_path, monkeypatch, order):
    """The layout is one edit in one place: a changed ``COLUMN_ORDER`` moves every
    column in what the writer writes and where each decoder reads it."""
    written = {c: F.encode_columns(records(points(*c))) for c in COMBOS}
    monkeypatch.setattr(F, "COLUMN_ORDER", order)
    monkeypatch.setattr(F, "_LAYOUTS", {})  # the layouts known so far are of the usual order
    for combo in COMBOS:
        pts = points(*combo)
        payload = F.encode_columns(records(pts))
        assert payload != written[combo]  # the columns did move
        lay = F.columns_layout(payload)
        assert sorted(F.COLUMN_ORDER, key=lambda name: getattr(lay, name).start) == list(order)
        assert each_decoder(pts, tmp_path, monkeypatch) == expected(pts), combo


def _modules() -> list[tuple[str, ast.Module]]:
    root = Path(nblog.__file__).parent
    return [(str(p.relative_to(root.parent)), ast.parse(p.read_text(), str(p))) for p in sorted(root.rglob("*.py"))]


def _names(tree: ast.Module) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}


def test_only_the_format_reads_a_columns_frame_or_file_head_or_walks_frames():
    """No module but ``_format`` unpacks a COLUMNS head (or computes where a column
    lies from one); none but ``_format`` and ``_walk`` touches the frame magic, the
    frame header or the file header's fields."""
    owners = {"COLUMNS_HEAD": {"nblog/format/_format.py"}, "columns_head": set(),
              "FRAME_MAGIC": {"nblog/format/_format.py", "nblog/format/_walk.py"},
              "FRAME_HEADER": {"nblog/format/_format.py", "nblog/format/_walk.py"},
              "FILE_MAGIC": {"nblog/format/_format.py", "nblog/format/_walk.py"}}
    found = {name: {path for path, tree in _modules() if name in _names(tree)} for name in owners}
    assert {name: paths - owners[name] for name, paths in found.items()} == {name: set() for name in owners}
    unpacking = set()
    for path, tree in _modules():
        for n in ast.walk(tree):
            if (isinstance(n, ast.Attribute) and n.attr in ("unpack", "unpack_from", "iter_unpack")
                    and isinstance(n.value, ast.Attribute) and n.value.attr == "FILE_HEADER"):
                unpacking.add(path)
    assert unpacking <= {"nblog/format/_walk.py"}


# -- the frame walk: every reader takes LogFile's -------------------------------------------


PREFIX_SESSION = {"rank": 0, "session": 0, "wall_start": 1000.0, "format_version": F.FORMAT_VERSION}


def prefix(session: dict | None = None) -> bytes:
    return (F.file_header() + F.json_frame(F.FRAME_SESSION, PREFIX_SESSION if session is None else session)
            + F.frame(F.FRAME_TAGS, F.encode_tag_defs([(0, F.KIND_SCALAR, "loss")])))


def columns(steps) -> bytes:
    return F.frame(F.FRAME_COLUMNS, F.encode_columns(records([(s, 0.5, 0, s) for s in steps])))


def read_by_logfile(path: str) -> tuple[bool, list[int]]:
    """Whether LogFile reads the log at all, and the steps of the points it reads."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lf = LogFile(path)
        try:
            lf.poll()
        except nblog.FormatVersionError:
            return False, []
    return lf.version not in (None, -1), lf.points()["step"].tolist()


def test_walk_keeps_a_torn_tail_apart_from_damage():
    from nblog.format import _walk as W

    a, b, c, d = columns(range(3)), columns(range(3, 6)), columns(range(6, 9)), columns(range(9, 12))
    bad = bytearray(c)
    bad[F.FRAME_HEADER_SIZE + 40] ^= 1  # a payload byte: the frame's header still holds
    head = F.file_header()
    data = head + a + b"junk NBF more junk" + b + bytes(bad) + d + d[:30]
    found, stop = W.walk(data, len(head))
    at_b = len(head) + len(a) + 18
    at_c = at_b + len(b)
    at_d = at_c + len(c)
    assert found == [(len(head), F.FRAME_COLUMNS, len(head) + len(a), True),
                     (len(head) + len(a), W.NO_FRAME, at_b, False),  # one range up to the next frame
                     (at_b, F.FRAME_COLUMNS, at_c, True), (at_c, F.FRAME_COLUMNS, at_d, False),
                     (at_d, F.FRAME_COLUMNS, at_d + len(d), True)]
    assert stop == at_d + len(d)  # the torn frame after it: not written yet
    found, stop = W.walk(data[:at_d], len(head))  # a damaged last frame: not written yet either
    assert stop == at_c and found[-1][0] == at_b
    assert [kind for kind, _payload in W.frames(data, len(head))] == [F.FRAME_COLUMNS] * 3


def test_the_last_step_scan_skips_a_damaged_frame_whole_as_readers_do(tmp_path):
    """A damaged frame's payload is never searched for frames: a frame that lies in it
    (here a whole, checksummed one, in a text record) is no record of the log. The scan
    for the last step resynchronised inside it and gave a step no reader shows."""
    inner = F.frame(F.FRAME_POINTS, F.POINT.pack(10**6, 1.0, 0, 5))
    text = b"x" + inner + b"y"
    outer = bytearray(F.frame(F.FRAME_TEXT, F.TEXT_HEAD.pack(11, 0, 5, len(text)) + text))
    outer[F.FRAME_HEADER_SIZE + F.TEXT_HEAD.size] ^= 0x40  # the "x": the frame's payload fails its checksum
    path = tmp_path / "events.r0.s0.log"
    path.write_bytes(prefix() + columns(range(10)) + bytes(outer) + columns(range(20, 30))
                     + F.json_frame(F.FRAME_END, {"status": "finished", "ms": 30}))
    read, steps = read_by_logfile(str(path))
    assert read and max(steps) == 29
    assert log_last_step(str(path)) == 29
    assert _log_record_summary(str(path))["last_step"] == 29


def test_a_damaged_file_header_is_read_past_by_every_reader(tmp_path):
    """LogFile reads past a damaged file header when the session header names the
    format; the last-step scan and the summary of a resumed session did not (None)."""
    data = bytearray(prefix() + columns(range(10)) + F.json_frame(F.FRAME_END, {"status": "finished", "ms": 9,
                                                                                 "wall": 1009.0}))
    data[3] ^= 0x01  # "NBEV" -> "NBEW"
    path = tmp_path / "events.r0.s0.log"
    path.write_bytes(bytes(data))
    assert read_by_logfile(str(path)) == (True, list(range(10)))
    assert read_header(str(path))["wall_start"] == 1000.0
    assert log_last_step(str(path)) == 9
    summary = _log_record_summary(str(path))
    assert (summary["first_step"], summary["last_step"], summary["end"]) == (0, 9, 1009.0)


HEADERS = {
    "sound": F.FILE_HEADER.pack(F.FILE_MAGIC, F.FORMAT_VERSION, 0),
    "reserved flags set": F.FILE_HEADER.pack(F.FILE_MAGIC, F.FORMAT_VERSION, 1),
    "version 0": F.FILE_HEADER.pack(F.FILE_MAGIC, 0, 0),
    "a damaged magic": F.FILE_HEADER.pack(b"NBEW", F.FORMAT_VERSION, 0),
    "a newer version": F.FILE_HEADER.pack(F.FILE_MAGIC, F.FORMAT_VERSION + 1, 0),
}


@pytest.mark.parametrize("header", list(HEADERS))
@pytest.mark.parametrize("named", [True, False])
def test_every_reader_reads_the_file_headers_logfile_reads(tmp_path, header, named):
    """One file-header rule: the session header, the last step and the summary of a
    resumed session are read from exactly the logs whose points LogFile reads."""
    session = dict(PREFIX_SESSION)
    if not named:
        del session["format_version"]
    path = tmp_path / "events.r0.s0.log"
    path.write_bytes(HEADERS[header] + prefix(session)[F.FILE_HEADER.size:] + columns(range(5)))
    read, steps = read_by_logfile(str(path))
    assert read == (header == "sound" or named)  # a newer one not named: refused
    assert steps == (list(range(5)) if read else [])
    assert bool(read_header(str(path))) == read
    assert log_last_step(str(path)) == (4 if read else None)
    assert _log_record_summary(str(path))["first_step"] == (0 if read else None)
