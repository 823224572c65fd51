"""nblog.format._names: names that become path components, and slugs of run names."""

from __future__ import annotations

import pytest

from nblog.format._names import check_name, slug


@pytest.mark.parametrize(
    "bad",
    [
        "",
        " ",
        "   ",
        "\u00a0\u3000",  # no-break and ideographic spaces: blank too
        ".",
        "..",
        "../x",
        "a..b",
        "x/..",
        "a/b",
        "/abs",
        "a\\b",
        "a\0b",
        "\0",
        "tab\there",
        "line\nbreak",
        "esc\x1b[31m",
        "del\x7f",
        "c1\x85",
        "x" * 201,
        "\ud800",  # a lone surrogate: no UTF-8 bytes, so no file name
    ],
)
def test_check_name_refuses(bad):
    with pytest.raises(ValueError) as info:
        check_name(bad, "project")
    assert "project" in str(info.value)


@pytest.mark.parametrize("bad", [None, 3, b"bytes", ["a"]])
def test_check_name_refuses_non_strings(bad):
    with pytest.raises(ValueError, match="run_name must be a string"):
        check_name(bad, "run_name")


@pytest.mark.parametrize(
    "good", ["llm", "ddp-1a2b3c4d", "a.b", ".hidden", "with space", "ünïcode", "🔥", "x" * 200, "a@b(c)"]
)
def test_check_name_accepts_and_returns_unchanged(good):
    assert check_name(good, "project") == good


def test_check_name_counts_utf8_bytes_not_characters():
    check_name("é" * 100, "project")  # 200 bytes
    with pytest.raises(ValueError, match="200 bytes"):
        check_name("é" * 101, "project")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (None, "run"),
        ("", "run"),
        ("DDP Run", "ddp-run"),
        ("a/b\\c", "a-b-c"),
        ("..", "run"),
        ("-x-", "x"),
        ("ünï 🔥", "n"),
        ("v1.2_final", "v1.2_final"),
        ("x" * 100, "x" * 40),
        ("a" * 39 + "-b", "a" * 39),
    ],
)
def test_slug(name, expected):
    assert slug(name) == expected


def test_slug_is_always_a_safe_name():
    for name in ["..", "../../etc", "\0", "/", "...", "-.-", "A" * 300]:
        s = slug(name)
        assert check_name(s, "slug") == s
        assert len(s) <= 40
