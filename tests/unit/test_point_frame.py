"""RunReader's bulk point frames (scalars, timers) equal a plain record-by-record
reading of the same files: ranks, sessions, kinds, tag selection, hiding, times."""

from __future__ import annotations

import math

import pytest

import nblog as nb
from nblog.format import _format as F


def write(make_run, env, steps, big=False):
    run = make_run(run_id="frame-00000000", resume="auto", env=env, timing_all_ranks=True)
    for step in steps:
        run.add_scalar({"a": float(step), "b/c": -float(step), "nan": math.nan if step % 7 == 0 else 1.0}, step=step)
        with run.timer("t", step=step):
            pass
        if step % 5 == 0:
            run._log_system({"system/cpu_percent": 50.0})
    if big:  # several POINTS frames (1 MiB each)
        for i in range(120_000):
            run.add_scalar("many", float(i), step=steps[-1])
    run.finish()
    return run


def reference(reader, kind, ranks, wanted=None, include_hidden=False):
    """(rank, session, step, tag, value, wall_time, active_time[, hidden]) per record."""
    rows = []
    for r in ranks:
        files = [(lf.header.get("session"), lf) for lf in reader.files(r)]
        firsts = {s: lf.first_step for s, lf in files}
        offset = 0.0
        for s, lf in files:
            later = [firsts[t] for t, _ in files if t > s and firsts[t] is not None]
            thr = min(later) if later and kind != F.KIND_SYSTEM else None
            pts = lf.points()
            wall0 = lf.header["wall_start"]
            for step, value, tid, ms in zip(pts["step"].tolist(), pts["value"].tolist(), pts["tag"].tolist(),
                                            pts["ms"].tolist(), strict=True):
                k, name = lf.tags.get(tid, (None, None))
                if k != kind or (wanted is not None and name not in wanted):
                    continue
                hidden = thr is not None and step >= thr
                if hidden and not include_hidden:
                    continue
                row = (r, s, step, name, value, wall0 + ms / 1000.0, offset + ms / 1000.0)
                rows.append(row + ((hidden,) if include_hidden else ()))
            offset += lf.max_ms / 1000.0
    return rows


def same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x[:4] == y[:4] and x[7:] == y[7:]
        for u, v in zip(x[4:7], y[4:7], strict=True):
            assert u == v or (math.isnan(u) and math.isnan(v))


@pytest.mark.parametrize("big", [False, True], ids=["small", "several-frames"])
def test_frames_equal_a_record_by_record_reading(make_run, big):
    env1 = {"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "NB_RUN_ID": "frame-00000000"}
    env0 = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2", "NB_RUN_ID": "frame-00000000"}
    run = write(make_run, env0, list(range(0, 30)), big)
    write(make_run, env1, list(range(0, 30)))
    write(make_run, env0, list(range(12, 40)))  # a restart: hides rank 0's steps 12-29 of session 0
    write(make_run, env1, list(range(20, 25)))
    r = nb.RunReader(run.dir)
    for kind, method in ((F.KIND_SCALAR, r.scalars), (F.KIND_TIMER, r.timers)):
        for include_hidden in (False, True):
            df = method(all_ranks=True, include_hidden=include_hidden)
            same(df.rows(), reference(r, kind, [0, 1], include_hidden=include_hidden))
            df = method(rank=1, include_hidden=include_hidden)
            same(df.rows(), reference(r, kind, [1], include_hidden=include_hidden))
    same(r.scalars(["b/c", "nan"]).rows(), reference(r, F.KIND_SCALAR, [0], {"b/c", "nan"}))
    assert r.scalars("nope").rows() == []
    sys_df = r.system()  # machines are sampled by local rank 0 only: rank 0 here; never hidden
    assert set(sys_df["rank"]) == {0}
    ref = reference(r, F.KIND_SYSTEM, [0])
    assert sys_df[["rank", "session", "step", "tag", "value", "wall_time"]].rows() == [x[:6] for x in ref]


def test_tag_table_equals_the_frames(make_run):
    """nb show's per-tag summary (numpy on the payloads) agrees with the frames."""
    import polars as pl

    from nblog.reader._answers.overview import tag_table

    env0 = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2", "NB_RUN_ID": "frame-00000000"}
    env1 = {"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "NB_RUN_ID": "frame-00000000"}
    run = write(make_run, env0, list(range(0, 30)), big=True)
    write(make_run, env1, list(range(0, 30)))
    write(make_run, env0, list(range(12, 40)))
    r = nb.RunReader(run.dir)
    table = {(t["kind"], t["tag"]): t for t in tag_table(r)}
    for kind, method in (("scalar", r.scalars), ("timer", r.timers)):
        df = method(all_ranks=True)
        for (tag,), g in df.group_by("tag"):
            t = table[kind, tag]
            assert t["points"] == len(g) and t["ranks"] == g["rank"].n_unique()
            low = g.filter(pl.col("rank") == g["rank"].min())
            top = low["step"].max()
            assert t["last_step"] == top
            want = low.filter(pl.col("step") == top)["value"][-1]
            assert t["last_value"] == want or (math.isnan(want) and t["last_value"] == "nan")
            bad = g.filter(~pl.col("value").is_finite())
            if len(bad):
                assert t["first_nonfinite"]["step"] == bad["step"].min()
            else:
                assert t["first_nonfinite"] is None
    assert table["scalar", "nan"]["first_nonfinite"] == {"step": 0, "rank": 0, "value": "nan"}
    assert ("scalar", "many") not in table  # logged at step 29 of session 0: hidden by the restart at 12
