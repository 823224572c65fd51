"""Odd sizes, with documented limits: 100,000 distinct tags; tags of 1024 characters
(kept) and of 10,000 (refused: one warning, counted); a text of 10 MB (kept) and one
past 16 MiB of UTF-8 (refused); configs with a cycle, objects that are not JSON, a
``repr`` that raises, nesting thousands deep — handled, never a crash of ``init``.
"""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import nblog as nb
from nbcli.app import app
from nblog.format import _format as F


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "nblog" and r.levelno >= logging.WARNING]


@pytest.fixture
def run(tmp_path):
    r = nb.init("sizes", run_id="sizes-00000000", root=tmp_path / "runs", system=False, _environ={})
    yield r
    r.finish()


def test_100000_distinct_tags(run, capsys):
    t0 = time.perf_counter()
    tags = [f"layer{i // 1000:03d}/unit{i % 1000:03d}/grad_norm" for i in range(100_000)]
    run.add_scalar({tag: i + 0.5 for i, tag in enumerate(tags)}, step=0)
    for i, tag in enumerate(tags[:1000]):  # the single-tag form too
        run.add_scalar(tag, float(i), step=1)
    run.finish()
    logged = time.perf_counter() - t0
    t1 = time.perf_counter()
    r = nb.RunReader(run.dir)
    assert len(r.tags()) == 100_000
    df = r.scalars()
    assert len(df) == 101_000
    first = df.filter(df["step"] == 0)
    assert first["tag"].to_list() == tags and first["value"].to_list() == [i + 0.5 for i in range(100_000)]
    read = time.perf_counter() - t1
    res = CliRunner().invoke(app, ["show", run.dir, "--json"])
    assert res.exit_code == 0 and len(json.loads(res.stdout)["tags"]) == 100_000
    with capsys.disabled():
        print(f"\n100,000 tags: logged in {logged:.2f} s, read in {read:.2f} s")


def test_tag_length_limit(run, caplog):
    caplog.set_level(logging.WARNING, logger="nblog")
    ok = "t" * F.MAX_TAG_CHARS
    wide = "é" * F.MAX_TAG_CHARS  # 1024 characters, 2048 bytes: the limit counts characters
    long = "x" * 10_000
    for step in range(100):
        run.add_scalar(long, 1.0, step=step)  # one call site: one warning for all 100
        run.add_scalar({ok: float(step), wide: -float(step)}, step=step)
    run.add_scalar("y" * (F.MAX_TAG_CHARS + 1), 1.0, step=0)
    run.add_text(long, "text", step=0)
    with run.timer(long):
        pass
    run.finish()
    warnings = warnings_of(caplog)
    assert len([w for w in warnings if "longer than 1024" in w]) == 4, warnings  # per call site and tag
    r = nb.RunReader(run.dir)
    assert sorted(r.tags()) == sorted([ok, wide])
    assert r.scalars(wide)["value"].to_list() == [-float(s) for s in range(100)]
    (s,) = r.sessions()
    assert s["dropped"]["bad_tag"] == 100 + 1 + 1 + 1


def test_a_10_mb_text_is_kept_and_one_past_16_mib_of_utf8_is_refused(run, caplog):
    caplog.set_level(logging.WARNING, logger="nblog")
    big = ("0123456789abcdé\n" * (10_000_000 // 16))[:10_000_000]
    run.add_text("big", big, step=0)
    run.add_text("too_big", "x" * ((16 << 20) + 1), step=1)  # past 16 Mi characters
    run.add_text("too_big_utf8", "€" * (6 << 20), step=2)  # 6 Mi characters, 18 MiB of UTF-8
    run.add_text("edge", "€" * ((16 << 20) // 3), step=3)  # just under 16 MiB of UTF-8
    run.finish()
    r = nb.RunReader(run.dir)
    tx = r.text()
    assert tx["tag"].to_list() == ["big", "edge"]
    assert tx["text"][0] == big
    (s,) = r.sessions()
    assert s["dropped"]["bad_value"] == 2
    assert len([w for w in warnings_of(caplog) if "16 MiB" in w]) == 2


class Unprintable:
    def __repr__(self):
        raise RuntimeError("no repr for you")


class Sneaky(dict):
    """A mapping whose items() raises."""

    def items(self):
        raise RuntimeError("no items")


def deep(n: int) -> dict:
    d: dict = {"leaf": 1}
    for _ in range(n):
        d = {"x": d}
    return d


def test_odd_configs_never_crash_init(tmp_path):
    import datetime
    import decimal
    import fractions

    import numpy as np

    cycle: dict = {"lr": 0.1}
    cycle["self"] = cycle
    lst: list = [1]
    lst.append(lst)
    config = {
        "cycle": cycle, "list_cycle": lst, "set": {3, 1}, "bytes": b"\x00\xff", "complex": 1 + 2j,
        "when": datetime.datetime(2026, 1, 2, 3, 4, 5), "decimal": decimal.Decimal("1.10"),
        "fraction": fractions.Fraction(1, 3), "array": np.arange(3), "nan": float("nan"), "inf": float("-inf"),
        "huge_int": 10**400, "tuple_key": {(1, 2): "t"}, "none_key": {None: 1}, "unprintable": Unprintable(),
        "type": int, "func": len, "deep": deep(5000), "obj": object(), "sneaky": Sneaky(a=1),
        "text": "\x1b[31m[bold]x[/]\u202e",
    }
    for attempt in (config, Unprintable(), deep(20_000)):
        try:
            run = nb.init("cfg", root=tmp_path / "runs", config=attempt, system=False, _environ={})
        except (TypeError, ValueError) as err:  # a clear refusal is fine, a crash is not
            assert attempt is not config, err
            continue
        run.finish()
        meta = json.loads((Path(run.dir) / "run.json").read_text())  # strict JSON: no NaN
        assert isinstance(meta["config"], dict)
        if attempt is config:
            got = meta["config"]
            assert got["cycle"]["self"] == "<cycle>" and got["cycle"]["lr"] == 0.1
            assert got["list_cycle"] == [1, "<cycle>"]
            assert got["nan"] == "nan" and got["inf"] == "-inf" and got["huge_int"] == 10**400
            assert isinstance(got["unprintable"], str) and isinstance(got["sneaky"], str | dict)
            assert got["text"] == config["text"]
            d, depth = got["deep"], 0
            while isinstance(d, dict) and "x" in d:
                d, depth = d["x"], depth + 1
            assert depth >= 90 and d == "<nested too deep>"  # kept deep, cut with a marker past 100
            assert nb.RunReader(run.dir).config["when"] == repr(config["when"])
            res = CliRunner().invoke(app, ["show", run.dir])
            assert res.exit_code == 0 and "\x1b" not in res.output
    assert math.isnan(config["nan"])
