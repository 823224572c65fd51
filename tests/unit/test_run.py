"""nblog.write._run.Run: the logging calls of a training loop, read back with RunReader.

Bad input never raises (it is warned about once per call site and tag, skipped and
counted in the session); ``NB_STRICT=1`` raises instead. Values and tags round-trip
exactly.
"""

from __future__ import annotations

import decimal
import fractions
import json
import logging
import math
import os
import struct

import numpy as np
import pytest

import nblog as nb


def reader(run):
    return nb.RunReader(run.dir)


def dropped(run):
    """The dropped-point counters of the run's rank-0 session, as a reader sees them."""
    (session,) = [s for s in reader(run).sessions() if s["session"] == run.session]
    return session["dropped"]


def short(x):
    return repr(x)[:24]


def skip_warnings(caplog):
    return [r for r in caplog.records if "the point is skipped" in r.getMessage()]


class Floaty:
    def __float__(self):
        return 2.25


class Broken:
    def __float__(self):
        raise RuntimeError("no")


BAD_VALUES = [None, "1.0", b"1", bytearray(b"1"), [1.0], (1.0,), {"a": 1}, object(), 1j, 10**400,
              Broken(), np.array([1.0, 2.0])]
BAD_TAGS = [None, 3, 1.5, b"loss", "", "a\0b", "x" * 1025, ("a",), "\ud800", "ok\udfffno"]
BAD_STEPS = [-1, 1.0, 1.5, "3", True, False, 2**63, -(2**70), [1], float("nan")]


# -- bad input never raises --------------------------------------------------------


@pytest.mark.parametrize("value", BAD_VALUES, ids=short)
def test_bad_values_are_skipped_and_counted(make_run, value):
    run = make_run()
    run.add_scalar("loss", value, step=1)
    run.add_scalar({"loss": value, "ok": 1.0}, step=2)
    run.add_scalar("loss", 0.5, step=3)
    run.finish()
    df = reader(run).scalars()
    assert sorted(zip(df["tag"], df["step"], df["value"], strict=True)) == [("loss", 3, 0.5), ("ok", 2, 1.0)]
    assert dropped(run) == {"bad_value": 2}


@pytest.mark.parametrize("tag", BAD_TAGS, ids=short)
def test_bad_tags_are_skipped_and_counted(make_run, tag):
    run = make_run()
    run.add_scalar(tag, 1.0, step=1)
    run.add_scalar({tag: 1.0, "ok": 2.0}, step=2)
    run.add_text(tag, "text", step=1)
    with run.timer(tag):
        pass
    run.finish()
    r = reader(run)
    assert r.tags(kind=None) == ["ok"]
    assert r.scalars()["value"].to_list() == [2.0]
    assert dropped(run) == {"bad_tag": 4}


@pytest.mark.parametrize("step", BAD_STEPS, ids=short)
def test_bad_steps_are_skipped_and_counted(make_run, step):
    run = make_run()
    run.add_scalar("loss", 1.0, step=step)
    run.add_scalar({"loss": 1.0, "acc": 0.5}, step=step)
    run.add_text("t", "x", step=step)
    with run.timer("data", step=step):
        pass
    run.add_scalar("loss", 2.0, step=7)
    run.finish()
    r = reader(run)
    assert r.scalars()[["tag", "step", "value"]].rows() == [("loss", 7, 2.0)]
    assert len(r.text()) == 0 and len(r.timers()) == 0
    assert dropped(run) == {"bad_step": 4}


def test_a_step_past_int64_never_becomes_the_current_step(make_run):
    # 2**63 is an int >= 0 but does not fit the format: it must be refused as a bad
    # step, not become the step later texts and timers use (which once made finish()
    # raise struct.error from the writer and lost the texts)
    run = make_run()
    run.add_scalar("a", 1.0, step=4)
    run.add_scalar("a", 2.0, step=2**63)
    run.add_scalar({"a": 3.0}, step=2**64)
    run.add_text("t", "at the last good step")
    with run.timer("data"):
        pass
    run.finish()
    r = reader(run)
    assert r.scalars()["step"].to_list() == [4]
    assert r.text()["step"].to_list() == [4]
    assert r.timers()["step"].to_list() == [4]
    assert dropped(run) == {"bad_step": 2}


def test_bad_text_is_skipped_and_counted(make_run):
    run = make_run()
    run.add_text("t", None, step=0)
    run.add_text("t", b"bytes", step=0)
    run.add_text("t", 3, step=0)
    run.add_text("t", "lone \ud800 surrogate", step=0)
    run.add_text("t", "fine", step=0)
    run.finish()
    assert reader(run).text()["text"].to_list() == ["fine"]
    assert dropped(run) == {"bad_value": 4}


def test_a_tag_that_is_not_a_str_or_dict_is_counted(make_run):
    run = make_run()
    run.add_scalar(["loss"], 1.0, step=0)
    run.add_scalar(42, 1.0, step=0)
    run.finish()
    assert dropped(run) == {"bad_tag": 2}


def test_warns_once_per_call_site_and_tag(make_run, caplog):
    caplog.set_level(logging.WARNING, "nblog")
    run = make_run()
    for step in range(5):
        run.add_scalar("loss", "nan?", step=step)  # one call site, one tag: 1 warning
    for step in range(5):
        run.add_scalar("loss", None, step=step)  # another call site: 1 more
    for step in range(5):
        run.add_scalar({"acc": "x", "loss": "y"}, step=step)  # another site, two tags: 2 more
    run.add_scalar("loss", 1.0, step=-1)  # a different problem at a new site: 1 more
    run.finish()
    warnings = skip_warnings(caplog)
    assert len(warnings) == 5
    here = os.path.basename(__file__)
    assert all(here in w.getMessage() for w in warnings)  # they point at the user's line
    assert dropped(run) == {"bad_value": 20, "bad_step": 1}


def test_strict_mode_from_environment_raises(make_run):
    run = make_run(env={"NB_STRICT": "1"})
    with pytest.raises(nb.StrictModeError) as info:
        run.add_scalar("loss", "high", step=0)
    assert info.value.tag == "loss"
    assert isinstance(info.value, ValueError)
    with pytest.raises(nb.StrictModeError):
        run.add_scalar({"loss": None}, step=0)
    with pytest.raises(nb.StrictModeError):
        run.add_scalar("", 1.0, step=0)
    with pytest.raises(nb.StrictModeError):
        run.add_scalar("loss", 1.0, step=-3)
    with pytest.raises(nb.StrictModeError):
        run.add_text("t", b"not text", step=0)
    with pytest.raises(nb.StrictModeError):
        run.timer(None)
    run.add_scalar("loss", 1.0, step=0)
    run.finish()
    assert reader(run).scalars()["value"].to_list() == [1.0]


def test_strict_argument_overrides_environment(make_run):
    run = make_run(env={"NB_STRICT": "1"}, strict=False)
    run.add_scalar("loss", "x", step=0)
    run = make_run(project="q", strict=True)
    with pytest.raises(nb.StrictModeError):
        run.add_scalar("loss", "x", step=0)


# -- values --------------------------------------------------------------------------


def bits(x):
    return struct.pack("<d", x)


def test_non_finite_and_extreme_values_round_trip_exactly(make_run):
    values = [math.nan, -math.nan, math.inf, -math.inf, -0.0, 0.0, 5e-324, 1.7976931348623157e308,
              struct.unpack("<d", b"\x01\x00\x00\x00\x00\x00\xf8\x7f")[0]]  # a NaN with a payload
    run = make_run()
    for step, v in enumerate(values):
        run.add_scalar("x", v, step=step)
    run.add_scalar({f"d{i}": v for i, v in enumerate(values)}, step=100)
    run.finish()
    df = reader(run).scalars()
    tag_x = df.filter(df["tag"] == "x")
    assert [bits(v) for v in tag_x["value"]] == [bits(v) for v in values]
    d = df.filter(df["step"] == 100).sort("tag")
    assert [bits(v) for v in d["value"]] == [bits(values[int(t[1:])]) for t in d["tag"]]


def test_accepted_value_types(make_run):
    values = {
        "int": 3, "bool": True, "float": 0.1, "big_int": 2**62,
        "np_float32": np.float32(1.5), "np_float16": np.float16(0.5), "np_int64": np.int64(-7),
        "np_uint8": np.uint8(255), "np_bool": np.bool_(True), "np_0d": np.array(2.5),
        "np_0d_int": np.array(4, dtype=np.int32), "np_nan": np.float64("nan"),
        "decimal": decimal.Decimal("0.25"), "fraction": fractions.Fraction(1, 4), "floaty": Floaty(),
    }
    run = make_run()
    for tag, v in values.items():
        run.add_scalar(tag, v, step=0)
    run.finish()
    got = dict(reader(run).scalars()[["tag", "value"]].rows())
    for tag, v in values.items():
        assert bits(got[tag]) == bits(float(v)), tag
    assert dropped(run) == {}


@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad")
def test_torch_zero_dim_tensors_are_accepted(make_run):
    torch = pytest.importorskip("torch")
    run = make_run()
    run.add_scalar("t_float", torch.tensor(1.5), step=0)
    run.add_scalar("t_int", torch.tensor(3), step=0)
    run.add_scalar("t_grad", torch.tensor(2.0, requires_grad=True) * 2, step=0)
    run.add_scalar("t_half", torch.tensor(0.5, dtype=torch.float16), step=0)
    run.add_scalar({"t_dict": torch.tensor(-1.0)}, step=1)
    run.add_scalar("t_vector", torch.tensor([1.0, 2.0]), step=2)  # not a scalar: skipped
    run.finish()
    got = dict(reader(run).scalars()[["tag", "value"]].rows())
    assert got == {"t_float": 1.5, "t_int": 3.0, "t_grad": 4.0, "t_half": 0.5, "t_dict": -1.0}
    assert dropped(run) == {"bad_value": 1}


def test_numpy_and_torch_integer_steps_are_accepted(make_run):
    run = make_run()
    run.add_scalar("a", 1.0, step=np.int64(5))
    run.add_scalar("a", 2.0, step=np.uint32(6))
    run.finish()
    assert reader(run).scalars()["step"].to_list() == [5, 6]


# -- tags ------------------------------------------------------------------------------

ODD_TAGS = [
    "train/loss", "a b", " lead", "trail ", "a_b", "x@y", "[bold]red[/bold]", "[/]", "(paren)",
    "ünïcödé", "日本語/損失", "🔥🚀", "e\u0301", "\u00e9", "tab\there", "\x1b[31mred", "%s %d {}",
    "'q\"", "back\\slash", "..", "/", "//a//", "a" * 1024,
]


def test_odd_tags_round_trip_byte_for_byte(make_run):
    run = make_run()
    for i, tag in enumerate(ODD_TAGS):
        run.add_scalar(tag, float(i), step=0)
    run.add_scalar({tag: float(i) for i, tag in enumerate(ODD_TAGS)}, step=1)
    for tag in ODD_TAGS:
        run.add_text(tag, tag, step=0)
        with run.timer(tag, step=0):
            pass
    run.finish()
    r = reader(run)
    assert r.tags() == sorted(ODD_TAGS)
    assert r.tags(kind="text") == sorted(ODD_TAGS)
    assert r.tags(kind="timer") == sorted(ODD_TAGS)
    got = {(tag, step): v for tag, step, v in r.scalars()[["tag", "step", "value"]].rows()}
    for i, tag in enumerate(ODD_TAGS):
        assert got[(tag, 0)] == got[(tag, 1)] == float(i)
    texts = r.text()
    assert all(t.encode() == x.encode() for t, x in zip(texts["tag"], texts["text"], strict=True))
    assert set(r.scalars(["e\u0301"])["tag"]) == {"e\u0301"}  # no Unicode normalisation
    assert dropped(run) == {}


def test_a_lone_surrogate_tag_is_refused_and_does_not_break_reading(make_run):
    # Decision: a str with a lone surrogate has no UTF-8 bytes, so it cannot round-trip
    # "byte for byte" and a reader could not return it; it is a bad tag (warned, skipped,
    # counted), and every other tag stays readable.
    run = make_run()
    run.add_scalar("\ud800", 1.0, step=0)
    run.add_scalar({"ok": 2.0, "x\udcff": 3.0}, step=0)
    run.finish()
    r = reader(run)
    assert r.scalars()[["tag", "value"]].rows() == [("ok", 2.0)]
    assert dropped(run) == {"bad_tag": 2}


# -- forms and steps ---------------------------------------------------------------------


def test_dict_form_and_tag_value_form(make_run):
    run = make_run()
    run.add_scalar({"train/loss": 1.0, "lr": 0.1}, step=10)
    run.add_scalar("train/loss", 0.5, step=11)
    run.add_scalar("lr", value=0.05, step=11)
    run.add_scalar({}, step=12)
    run.finish()
    rows = sorted(reader(run).scalars()[["step", "tag", "value"]].rows())
    assert rows == [(10, "lr", 0.1), (10, "train/loss", 1.0), (11, "lr", 0.05), (11, "train/loss", 0.5)]


def test_step_none_uses_the_runs_own_counter(make_run):
    run = make_run()
    run.add_scalar("a", 1.0)
    run.add_scalar("a", 2.0)
    run.add_scalar({"a": 3.0, "b": 3.0})  # one dict call is one step
    run.add_scalar("a", 4.0)
    run.add_text("t", "at the current step")  # does not advance the counter
    run.add_scalar("a", 5.0)
    run.finish()
    r = reader(run)
    rows = sorted(r.scalars()[["tag", "step", "value"]].rows())
    assert rows == [("a", 0, 1.0), ("a", 1, 2.0), ("a", 2, 3.0), ("a", 3, 4.0), ("a", 4, 5.0), ("b", 2, 3.0)]
    assert r.text()["step"].to_list() == [3]


def test_text_round_trips(make_run):
    texts = ["", "plain", "multi\nline\r\n", "[bold]not markup[/bold]", "\x1b[2J", "ü🔥" * 1000]
    run = make_run()
    for step, text in enumerate(texts):
        run.add_text("samples", text, step=step)
    run.finish()
    df = reader(run).text()
    assert df["text"].to_list() == texts
    assert df["step"].to_list() == list(range(len(texts)))
    assert set(df["tag"]) == {"samples"}


# -- timers --------------------------------------------------------------------------------


def test_timer_context_manager(make_run):
    run = make_run()
    run.add_scalar("loss", 1.0, step=4)
    with run.timer("data"):
        pass
    with run.timer("data", step=9):
        pass
    with pytest.raises(KeyError):
        with run.timer("fails"):
            raise KeyError("x")  # the exception goes on; the time is still recorded
    run.finish()
    df = reader(run).timers()
    assert sorted(df[["tag", "step"]].rows()) == [("data", 4), ("data", 9), ("fails", 4)]
    assert all(v >= 0 and math.isfinite(v) for v in df["value"])
    assert reader(run).tags() == ["loss"]  # timers have their own namespace


def test_timer_decorator(make_run):
    run = make_run()

    @run.timer("forward")
    def forward(x, *, scale):
        return x * scale

    @run.timer("fixed", step=3)
    def fixed():
        return "ok"

    for step in range(3):
        run.add_scalar("loss", 1.0, step=step)
        assert forward(step, scale=2) == step * 2
    assert fixed() == "ok"
    assert forward.__name__ == "forward"
    run.finish()
    df = reader(run).timers()
    assert sorted(df[["tag", "step"]].rows()) == [("fixed", 3), ("forward", 0), ("forward", 1), ("forward", 2)]


def test_a_bad_step_on_a_rank_that_only_times_never_reaches_its_timers(root):
    # rank 1 does not log scalars; add_scalar only remembers the step for its timers
    env = {"SLURM_JOB_ID": "1", "SLURM_NTASKS": "2", "SLURM_NNODES": "1", "SLURM_LOCALID": "0"}
    rank0 = nb.init("p", root=root, system=False, _environ={**env, "SLURM_PROCID": "0"})
    rank1 = nb.init("p", root=root, system=False, _environ={**env, "SLURM_PROCID": "1"})
    for step in (-5, 2**63, "7", 1.5, np.int64(3), 4):
        rank1.add_scalar("loss", 1.0, step=step)
        with rank1.timer("t", all_ranks=True):
            pass
    rank1.finish()
    rank0.finish()
    r = nb.RunReader(rank0.dir)
    assert r.timers(rank=1)["step"].to_list() == [3, 4]
    assert r.sessions(1)[0]["dropped"] == {"bad_step": 4}


def test_each_timer_occurrence_is_kept(make_run):
    run = make_run()
    for _ in range(5):
        with run.timer("opt", step=0):
            pass
    run.finish()
    assert len(reader(run).timers("opt")) == 5


# -- modes and lifecycle ----------------------------------------------------------------


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_disabled_mode_writes_nothing(root, how):
    kwargs = {"mode": "disabled"} if how == "argument" else {}
    env = {"NB_MODE": "disabled"} if how == "environment" else {}
    run = nb.init("p", root=root, _environ=env, config={"a": 1}, **kwargs)
    assert (run.id, run.dir, run.is_logging) == ("", None, False)
    run.add_scalar("loss", 1.0, step=0)
    run.add_scalar({"loss": "bad"}, step=-1)
    run.add_text("t", "x")
    with run.timer("t", all_ranks=True):
        pass
    run.flush()
    run.finish()
    run.finish()
    assert not root.exists()


def test_with_block_records_finished(make_run):
    with make_run(run_name="ok") as run:
        run.add_scalar("loss", 1.0, step=0)
    meta = json.loads(open(os.path.join(run.dir, "run.json")).read())
    assert meta["status"] == "finished"
    assert meta["sessions"][-1]["end"] is not None
    assert reader(run).scalars()["value"].to_list() == [1.0]


def test_with_block_records_failed_and_lets_the_exception_through(make_run):
    with pytest.raises(ZeroDivisionError):
        with make_run(run_name="bad") as run:
            run.add_scalar("loss", 1.0, step=0)
            1 / 0  # noqa: B018
    meta = json.loads(open(os.path.join(run.dir, "run.json")).read())
    assert meta["status"] == "failed"
    assert reader(run).scalars()["value"].to_list() == [1.0]


def test_finish_is_idempotent_and_later_calls_are_no_ops(make_run):
    run = make_run()
    run.add_scalar("a", 1.0, step=0)
    run.finish()
    run.finish("failed")
    run.add_scalar("a", 2.0, step=1)
    run.add_text("t", "late", step=1)
    with run.timer("late"):
        pass
    run.flush()
    meta = json.loads(open(os.path.join(run.dir, "run.json")).read())
    assert meta["status"] == "finished"
    r = reader(run)
    assert r.scalars()["value"].to_list() == [1.0]
    assert r.tags(kind=None) == ["a"]
    (s,) = r.sessions()
    assert s["end"]["status"] == "finished"


def test_flush_is_a_barrier(make_run):
    run = make_run(flush_interval=60)  # the writer thread would not write for a minute
    run.add_scalar({"a": 1.0, "b": 2.0}, step=0)
    run.add_text("t", "x", step=0)
    run.flush()
    r = reader(run)  # a reader in the same process, before finish
    assert sorted(r.scalars()["tag"]) == ["a", "b"]
    assert r.text()["text"].to_list() == ["x"]
    run.add_scalar("a", 3.0, step=1)
    run.flush()
    r.refresh()
    assert r.scalars("a")["value"].to_list() == [1.0, 3.0]


def test_run_attributes(make_run):
    run = make_run(run_name="My Run", config={"lr": 0.1})
    assert run.id.startswith("my-run-")
    assert run.dir == os.path.join(run.dir.rsplit(os.sep, 2)[0], "p", run.id)
    assert (run.rank, run.local_rank, run.world_size, run.session) == (0, 0, 1, 0)
    assert run.is_logging
    assert run.config == {"lr": 0.1}
