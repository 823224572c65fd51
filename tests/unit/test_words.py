"""nblog.reader.lowlevel.plural: the one rule for a count in a message."""

from __future__ import annotations

from nblog.reader.lowlevel import plural


def test_one_takes_the_singular_and_every_other_count_the_plural():
    assert [plural(n, "row") for n in (0, 1, 2, -1)] == ["0 rows", "1 row", "2 rows", "-1 row"]


def test_an_irregular_plural_and_thousands_separators():
    assert plural(2, "match", "matches") == "2 matches" and plural(1, "match", "matches") == "1 match"
    assert plural(20_000, "run", sep=True) == "20,000 runs" and plural(20_000, "run") == "20000 runs"
