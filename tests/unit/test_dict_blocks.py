"""add_scalar's dict form through the block path: a key set seen before is packed in one
call by the caller and split into point records by the writer thread
(``F.block_packer``, ``_writer.split_blocks``). Everything read back must be what the
point-by-point path stores: values, steps, tags, order, warnings, counters, summary.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import struct

import numpy as np
import pytest

import nblog as nb
from nblog.format import _format as F
from nblog.write._writer import split_blocks


def frame_rows(run, **kw):
    df = nb.RunReader(run.dir).scalars(**kw)
    return list(zip(df["step"].to_list(), df["tag"].to_list(), df["value"].to_list(), strict=True))


def same(a: float, b: float) -> bool:
    return struct.pack("<d", a) == struct.pack("<d", b)


def warnings_of(caplog, text):
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


# -- values, steps and order round-trip ------------------------------------------------


def test_a_repeating_key_set_reads_back_point_for_point_in_call_order(make_run):
    run = make_run()
    keys = [f"m/{k}" for k in range(10)]
    expect = []
    for step in range(3000):
        values = {k: step * 0.5 + j for j, k in enumerate(keys)}
        run.add_scalar(values, step=step)
        expect += [(step, k, v) for k, v in values.items()]
        if step % 7 == 0:  # a single scalar between the blocks, in call order
            run.add_scalar("single", -1.0 * step, step=step)
            expect.append((step, "single", -1.0 * step))
    assert run._blocks  # the block path was taken
    run.finish()
    assert frame_rows(run) == expect


def test_changing_key_sets_subsets_and_orders_each_read_back(make_run):
    run = make_run()
    rng = random.Random(5)
    pool = [f"t{k}" for k in range(12)]
    expect = []
    for step in range(400):
        keys = rng.sample(pool, rng.randint(1, 12)) if step % 3 else pool[: 1 + step % 4]
        values = {k: rng.random() for k in keys}
        run.add_scalar(values, step=step)
        expect += [(step, k, v) for k, v in values.items()]
    run.finish()
    assert frame_rows(run) == expect


def test_nan_inf_ints_and_bools_in_a_cached_key_set_are_kept_exactly(make_run):
    run = make_run()
    run.add_scalar({"a": 1.0, "b": 2.0, "c": 3.0}, step=0)
    odd = [(float("nan"), float("inf"), -0.0), (7, True, -(2**60)), (float("-inf"), 5e-324, 1e308)]
    for step, (a, b, c) in enumerate(odd, start=1):
        run.add_scalar({"a": a, "b": b, "c": c}, step=step)
    run.finish()
    got = frame_rows(run)
    want = [(0, "a", 1.0), (0, "b", 2.0), (0, "c", 3.0)]
    for step, vals in enumerate(odd, start=1):
        want += [(step, k, float(v)) for k, v in zip("abc", vals, strict=True)]
    assert [(s, t) for s, t, _ in got] == [(s, t) for s, t, _ in want]
    assert all(same(g, w) or (math.isnan(g) and math.isnan(w)) for (_, _, g), (_, _, w) in zip(got, want, strict=True))


def test_bad_values_in_a_cached_key_set_skip_only_themselves_and_are_counted(make_run, caplog):
    caplog.set_level(logging.WARNING, "nblog")
    run = make_run()
    run.add_scalar({"a": 1.0, "b": 2.0}, step=0)
    run.add_scalar({"a": 1.5, "b": 2.5}, step=1)  # cached
    run.add_scalar({"a": None, "b": 3.0}, step=2)
    run.add_scalar({"a": "x", "b": 4.0}, step=3)
    run.add_scalar({"a": 10**400, "b": 5.0}, step=4)
    run.add_scalar({"a": np.float32(0.25), "b": np.float64(6.0)}, step=5)  # numbers, not plain
    run.add_scalar({"a": 7.0, "b": 8.0}, step=6)
    run.finish()
    assert frame_rows(run) == [(0, "a", 1.0), (0, "b", 2.0), (1, "a", 1.5), (1, "b", 2.5), (2, "b", 3.0),
                               (3, "b", 4.0), (4, "b", 5.0), (5, "a", 0.25), (5, "b", 6.0), (6, "a", 7.0),
                               (6, "b", 8.0)]
    (session,) = nb.RunReader(run.dir).sessions()
    assert session["dropped"]["bad_value"] == 3
    assert len(warnings_of(caplog, "the point is skipped")) == 3


def test_strict_mode_raises_for_a_bad_value_in_a_cached_key_set(make_run):
    run = make_run(env={"NB_STRICT": "1"})
    run.add_scalar({"a": 1.0}, step=0)
    run.add_scalar({"a": 2.0}, step=1)
    with pytest.raises(nb.StrictModeError):
        run.add_scalar({"a": None}, step=2)


def test_steps_without_a_step_count_on_through_the_block_path(make_run):
    run = make_run()
    for i in range(5):
        run.add_scalar({"x": float(i), "y": -float(i)})
    run.add_scalar("z", 9.0)
    run.finish()
    assert frame_rows(run) == [(i, t, s * float(i)) for i in range(5) for t, s in (("x", 1), ("y", -1))] + [
        (5, "z", 9.0)]


# -- the highest step per tag: warnings and run.json -----------------------------------


def test_a_single_scalar_below_a_dict_block_step_is_warned(make_run, caplog):
    """The block path keeps only its key set's last step: a single scalar of one of its
    tags at a lower step must still be seen as going back."""
    caplog.set_level(logging.WARNING, "nblog")
    run = make_run()
    for step in range(3):
        run.add_scalar({"loss": 1.0, "lr": 2.0}, step=step * 10)  # 0, 10, 20: the last two cached
    run.add_scalar("loss", 3.0, step=15)
    run.add_scalar("other", 3.0, step=16)  # its own tag: fine
    run.finish()
    assert len(warnings_of(caplog, "lower than its step 20")) == 1
    assert "'loss'" in warnings_of(caplog, "lower than its step 20")[0]


def test_a_dict_below_its_own_block_step_is_warned_per_tag(make_run, caplog):
    caplog.set_level(logging.WARNING, "nblog")
    run = make_run()
    for step in (1, 2, 3):
        run.add_scalar({"a": 1.0, "b": 2.0}, step=step)
    run.add_scalar({"a": 1.0, "b": 2.0}, step=2)
    run.finish()
    assert len(warnings_of(caplog, "lower than its step 3")) == 2
    assert [s for s, _t, _v in frame_rows(run)] == [1, 1, 2, 2, 3, 3, 2, 2]


def test_run_json_keeps_the_highest_step_and_summary_of_block_points(make_run):
    run = make_run()
    for step in range(50):
        run.add_scalar({"a": float(step), "b": -float(step)}, step=step)
    run.add_scalar("late", 1.0, step=3)  # below the blocks' steps: not the last step
    run.add_scalar("bad", None, step=2)  # refused, but a current step
    run.finish()
    meta = json.load(open(os.path.join(run.dir, "run.json")))
    assert meta["sessions"][-1]["last_step"] == 49
    assert meta["summary"]["a"] == {"last": 49.0, "step": 49, "min": 0.0, "max": 49.0}
    assert meta["summary"]["b"] == {"last": -49.0, "step": 49, "min": -49.0, "max": 0.0}


def test_a_resumed_session_logs_dicts_after_the_last_step(make_run, root):
    run = make_run(run_id="res")
    for _ in range(20):
        run.add_scalar({"a": 1.0, "b": 2.0})
    run.finish()
    again = make_run(run_id="res", resume="auto")
    for _ in range(5):
        again.add_scalar({"a": 3.0, "b": 4.0})
    again.finish()
    df = nb.RunReader(again.dir).scalars("a")
    assert df["step"].to_list() == list(range(25))
    assert df["session"].to_list() == [0] * 20 + [1] * 5


def test_all_ranks_dicts_on_a_non_zero_rank_use_the_block_path(make_run):
    env = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"}
    make_run(run_id="ranks", env=env).finish()
    r1 = make_run(run_id="ranks", resume="auto", env={**env, "RANK": "1", "LOCAL_RANK": "1"})
    for step in range(10):
        r1.add_scalar({"a": float(step), "b": 1.0}, step=step, all_ranks=True)
        r1.add_scalar({"a": 5.0, "b": 6.0}, step=step)  # rank 0 only: not logged here
    r1.finish()
    df = nb.RunReader(r1.dir).scalars(rank=1)
    assert df["step"].to_list() == [s for s in range(10) for _ in "ab"]
    assert df["value"].to_list() == [v for s in range(10) for v in (float(s), 1.0)]


def test_dicts_wider_than_a_chunk_and_many_of_them_round_trip(make_run):
    """Blocks that straddle the writer's 1 MiB chunks are taken whole."""
    run = make_run()
    keys = [f"w{k}" for k in range(F.BLOCK_MAX_TAGS)]
    for step in range(300):
        run.add_scalar({k: step + j / 1024 for j, k in enumerate(keys)}, step=step)
    run.add_scalar({k: 1.0 for k in keys + ["one more"]}, step=300)  # wider: point by point
    run.finish()
    df = nb.RunReader(run.dir).scalars()
    assert len(df) == 300 * len(keys) + len(keys) + 1
    assert df["value"][: len(keys) * 300].to_list() == [s + j / 1024 for s in range(300) for j in range(len(keys))]


# -- split_blocks: the writer's side ---------------------------------------------------


def _records(points):
    return b"".join(F.POINT.pack(*p) for p in points)


def test_split_blocks_turns_a_random_mix_into_the_same_records():
    rng = random.Random(11)
    packers = {n: F.block_packer(tuple(range(100, 100 + n))) for n in (1, 2, 3, 10, 17)}
    raw, want = bytearray(), []
    for i in range(2000):
        if rng.random() < 0.4:
            # values whose bytes hold BLOCK_MARK where a tag id would be
            v = struct.unpack("<d", b"\xff" * 8)[0] if rng.random() < 0.3 else rng.random()
            p = (i, v, rng.randrange(50), 0xFFFFFFFF if rng.random() < 0.1 else i)
            raw += F.POINT.pack(*p)
            want.append(p)
        else:
            n = rng.choice(list(packers))
            vals = [struct.unpack("<d", b"\xff" * 8)[0] if rng.random() < 0.2 else rng.random() for _ in range(n)]
            raw += packers[n](i, i * 3, *vals)
            want += [(i, v, 100 + j, i * 3) for j, v in enumerate(vals)]
    out, used, n = split_blocks(bytes(raw))
    assert used == len(raw) and n == len(want)
    assert out == _records(want)  # bytes equal: NaN payloads kept too
    # cut anywhere: the pieces put together are the whole
    pos, pieces = 0, []
    while pos < len(raw):
        out, used, _n = split_blocks(bytes(raw[pos:]), rng.randrange(1, 2000))
        assert used > 0 and (pos + used - len(raw)) <= 0
        pieces.append(out)
        pos += used
    assert b"".join(pieces) == _records(want)


def test_split_blocks_leaves_out_a_block_cut_by_the_end():
    pack = F.block_packer((1, 2, 3))
    raw = _records([(0, 1.0, 0, 0)]) + pack(1, 1, 1.0, 2.0, 3.0)
    out, used, n = split_blocks(raw[:-24])
    assert (out, used, n) == (_records([(0, 1.0, 0, 0)]), 24, 1)


def test_a_key_set_whose_values_become_numpy_goes_point_by_point_and_stays_exact(make_run):
    run = make_run()
    run.add_scalar({"a": 1.0, "b": 2.0}, step=0)
    run.add_scalar({"a": 1.5, "b": 2.5}, step=1)
    run.add_scalar({"a": np.float64(3.0), "b": np.float32(4.0)}, step=2)  # demoted
    run.add_scalar({"a": 5.0, "b": 6.0}, step=3)
    run.add_scalar({"a": None, "b": 7.0}, step=4)  # a bad value once: not demoted for it
    assert run._blocks[("a", "b")] is None
    run.finish()
    assert frame_rows(run) == [(0, "a", 1.0), (0, "b", 2.0), (1, "a", 1.5), (1, "b", 2.5), (2, "a", 3.0),
                               (2, "b", 4.0), (3, "a", 5.0), (3, "b", 6.0), (4, "b", 7.0)]


def test_a_bad_value_once_keeps_the_block_path(make_run):
    run = make_run()
    run.add_scalar({"a": 1.0}, step=0)
    run.add_scalar({"a": None}, step=1)
    run.add_scalar({"a": 2.0}, step=2)
    assert run._blocks[("a",)] is not None
    run.finish()
    assert frame_rows(run) == [(0, "a", 1.0), (2, "a", 2.0)]
