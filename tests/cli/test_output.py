"""nbcli._output: escaping and formatting helpers."""

from __future__ import annotations

import io
import json
import sys

import pytest
from rich.console import Console

from nbcli import _output
from nbcli._output import (
    Column,
    Output,
    clean,
    data,
    emit_json,
    fmt_bytes,
    fmt_duration,
    fmt_seconds,
    fmt_value,
    json_text,
)


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain/tag", "plain/tag"),
        ("a\\b", "a\\b"),  # no control character: left alone
        ("\x1b[31mred", "\\x1b[31mred"),
        ("tab\there\nnew", "tab\\there\\nnew"),
        ("\x00\x07\x7f\x9b", "\\x00\\x07\\x7f\\x9b"),
        ("\u202eevil\u2066", "\\u202eevil\\u2066"),
        ("lone \udc80", "lone \\udc80"),
        ("a\\b\x1b", "a\\\\b\\x1b"),  # with escapes present, backslashes are doubled
        ("ünïcödé 日本", "ünïcödé 日本"),
    ],
)
def test_clean(raw, shown):
    assert clean(raw) == shown


def test_data_is_never_markup_on_a_terminal():
    console = Console(file=io.StringIO(), force_terminal=True, no_color=True, width=80)
    out = Output(console)
    assert out.rich
    out.table([Column("TAG")], [[data("[bold red]x[/] \x1b[2J")], ["[b]y[/b]"]])
    out.fields([("k", data("[i]v[/i]"))])
    out.line([data("[u]z[/u]", "bold"), data("\x1b[31m")])
    text = console.file.getvalue()
    for literal in ("[bold red]x[/] \\x1b[2J", "[b]y[/b]", "[i]v[/i]", "[u]z[/u]", "\\x1b[31m"):
        assert literal in text
    assert "\x1b[2J" not in text and "\x1b[31m" not in text


def test_plain_without_rich(capsys):
    out = Output()  # stdout is not a terminal under pytest's capture
    assert not out.rich and out.console is None
    out.line([data("a\tb"), data("c")])
    assert capsys.readouterr().out == "a\\tb\tc\n"


def test_json_text_valid_and_exact():
    obj = {"t": "\x1b[1m\u202e\x9b\udc80", "v": [float("nan"), float("inf"), -float("inf"), 1.5, None]}
    text = json_text(obj)
    assert "\x1b" not in text and "\u202e" not in text and "\x9b" not in text
    back = json.loads(text)
    assert back["t"] == obj["t"] and back["v"] == ["nan", "inf", "-inf", 1.5, None]
    assert "\n" not in json_text(obj, indent=None)


def test_formatters():
    assert [fmt_value(v) for v in (None, 1, 0.1234567, float("nan"), float("-inf"))] == [
        "-", "1", "0.123457", "nan", "-inf"]
    assert [fmt_seconds(v) for v in (0, 4e-7, 3.2e-6, 0.0151, 2.314)] == ["0s", "400ns", "3.2µs", "15.1ms",
                                                                        "2.31s"]
    assert [fmt_duration(v) for v in (None, 0.4, 45, 723, 11220, 3 * 86400 + 3600)] == [
        "-", "0.4s", "45s", "12m03s", "3h07m", "3d01h"]
    assert [fmt_bytes(v) for v in (None, 512, 1536, 5 << 20)] == ["-", "512 B", "1.5 KiB", "5.0 MiB"]


def test_plain_table_escapes_tabs(capsys):
    out = Output(Console(file=io.StringIO(), force_terminal=False))
    out.table([Column("A"), Column("B", numeric=True)], [["x\ty", 1.0], [None, 2]])
    assert capsys.readouterr().out == "A\tB\nx\\ty\t1\n-\t2\n"


def _ls_rows(n: int) -> list[dict]:
    """Rows shaped as nb ls --json prints them; every 10th with a failure (not flat)."""
    return [{"id": f"b{i:05d}", "project": "sweep", "name": None, "status": "failed" if i % 10 == 0 else "finished",
             "ranks": 1, "world_size": 1, "sessions": 1, "last_step": 4, "last_step_updated": 1.7e9 + i,
             "started": 1.7e9 + i, "duration_s": 0.015, "last_write": 1.7e9 + i, "size_bytes": 2134,
             "path": f"/data/runs/sweep/b{i:05d}",
             "failure": {"rank": 0, "type": "RuntimeError", "message": "x" * 200} if i % 10 == 0 else None,
             "failed_after": 0, "failure_line": "failed: rank 0, RuntimeError: x" if i % 10 == 0 else None}
            for i in range(n)]


def test_emit_json_writes_a_long_list_piece_by_piece(monkeypatch):
    """Issue 22 (nb ls --json of 20,000 runs): the document is written a batch of rows at
    a time; the memory it takes beyond the rows is a batch's, not the whole text's
    (several copies of ~10 MB before: the text, its escaped copy, the line to write).
    tracemalloc counts the bytes allocated: the same on an idle or a loaded machine."""
    import tracemalloc

    rows = _ls_rows(20_000)
    written: list[int] = []

    class Sink(io.TextIOBase):
        def write(self, s: str) -> int:
            written.append(len(s))
            return len(s)

    monkeypatch.setattr(sys, "stdout", Sink())
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        emit_json(rows)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    total = sum(written)
    assert total > 8_000_000
    assert peak < total / 3, f"{peak / 2**20:.1f} MiB taken to write {total / 2**20:.1f} MiB of JSON"
    assert max(written) < total / 10


def test_the_pieces_make_what_json_dumps_writes():
    nasty = "q\"b\\s\n\x1b[31m\u202e\x85 é"
    odd = [{}, {"a": float("nan"), nasty: nasty}, {"nested": {"x": [1, {"y": float("inf")}], "z": []}}, [1, [2, {}]],
           "s", 3, None, {1: 2}, {"e": {}}]
    for rows in ([], odd, _ls_rows(2_345), odd * 300):
        want = json.dumps(_output._finite(rows), indent=2, ensure_ascii=False, allow_nan=False, default=str)
        assert json_text(rows) == _output._JSON_UNSAFE.sub(_output._json_escape, want)
