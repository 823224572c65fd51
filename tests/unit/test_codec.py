"""One codec (issue 23): the COLUMNS layout is computed in one place
(``nblog.format._format.columns_layout``), and every decoder takes it from there: the
standard library's, numpy's, the Arrow path of ``RunReader.scalars``, ``LogFile``'s
record-by-record reads and the last-step scan.

- Every decoder reads every width and pattern of COLUMNS frames value for value.
- The column order is one tuple: with it changed (as a format version 3 might), the
  writer and every decoder still agree, so none of them computes an offset itself.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

import nblog
from nblog.format import _format as F
from nblog.format import _steps

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
    from nblog.reader._columns_read import columns_frame
    from nblog.reader._logfile import _Columns, _columns_of, _records_of_columns
    from nblog.reader._reader import POINT_SCHEMA

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
