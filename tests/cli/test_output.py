"""nbcli._output: escaping and formatting helpers."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from nbcli._output import (
    Column,
    Output,
    clean,
    data,
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
