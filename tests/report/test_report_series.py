"""nbcli.series (frames): buckets, debiased EMA, bands across ranks, non-finite points,
each against a plain numpy / Python reference."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from nbcli import series as S

pytestmark = pytest.mark.timing  # run again beside a CPU hog: scripts/test_loaded.sh


def frame(rank, x, value) -> pl.DataFrame:
    return pl.DataFrame({"rank": np.asarray(rank, np.int32), "x": np.asarray(x), "value": np.asarray(value, np.float64)})


def test_few_distinct_steps_are_kept_exactly():
    g = S.make_grid(np.array([5, 1, 3, 3, 9]), 10)
    assert not g.bucketed
    assert g.x().tolist() == [1, 3, 5, 9]
    assert g.assign(np.array([9, 1, 3])).tolist() == [3, 0, 1]


def test_a_one_step_spike_survives_2m_steps_in_2000_buckets():
    steps = np.arange(2_000_000)
    values = 1.0 + 0.01 * np.sin(steps / 1e4)
    values[1_300_000] = 50.0
    g = S.make_grid(steps, 2000)
    assert g.bucketed and g.count <= 2000 and g.width == 1000
    per = S.buckets(frame(np.zeros(len(steps)), steps, values), g)
    assert len(per) == g.count
    b = S.band(per, g)
    k = int(np.nanargmax(b.hi))
    assert b.hi[k] == 50.0
    assert g.x()[k] <= 1_300_000 < g.x()[k] + g.width
    # the mean of that bucket moves by the spike's share only; min stays the series'
    assert b.line[k] == pytest.approx(np.mean(values[int(g.x()[k]):int(g.x()[k]) + 1000]))
    assert b.lo[k] == pytest.approx(values[int(g.x()[k]):int(g.x()[k]) + 1000].min())


def _ema_reference(values: list[float], w: float) -> list[float]:
    out, num, den = [], 0.0, 0.0
    for v in values:
        if not math.isfinite(v):
            out.append(v)
            continue
        num = num * w + v
        den = den * w + 1.0
        out.append(num / den)
    return out


@pytest.mark.parametrize("w", [0.0, 0.6, 0.99])
def test_smooth_is_the_debiased_ema_per_rank_skipping_nonfinite(w):
    rng = np.random.default_rng(3)
    v0 = rng.normal(size=300)
    v0[[10, 200]] = [np.nan, np.inf]
    v1 = rng.normal(size=300) + 5
    f = pl.concat([frame(np.full(300, 1), np.arange(300), v1), frame(np.zeros(300), np.arange(300), v0)])
    out = S.smooth(f, w)
    for r, v in ((0, v0), (1, v1)):
        got = out.filter(pl.col("rank") == r).sort("x")["value"].to_list()
        want = _ema_reference(v.tolist(), w)
        np.testing.assert_allclose(got, want, rtol=1e-12)
    with pytest.raises(ValueError):
        S.smooth(f, 1.0)


def test_band_is_median_of_means_with_min_max_and_names_the_outlier():
    steps = np.arange(100)
    ranks, xs, vs = [], [], []
    truth = {}
    for r in range(8):
        v = np.cos(steps / 10) + 0.01 * r + (np.where(steps > 50, 3.0, 0.0) if r == 6 else 0.0)
        truth[r] = v
        ranks += [r] * 100
        xs += steps.tolist()
        vs += v.tolist()
    f = frame(ranks, xs, vs)
    g = S.make_grid(f["x"].to_numpy(), 2000)  # 100 steps: one bucket each
    b = S.band(S.buckets(f, g), g)
    m = np.stack([truth[r] for r in range(8)])
    np.testing.assert_allclose(b.line, np.median(m, axis=0))
    np.testing.assert_allclose(b.lo, m.min(axis=0))
    np.testing.assert_allclose(b.hi, m.max(axis=0))
    assert b.ranks == list(range(8)) and b.outlier == 6
    np.testing.assert_allclose(b.outlier_line, truth[6])


def test_one_rank_has_no_outlier_and_empty_buckets_are_nan():
    f = frame([0, 0, 0], [0, 1, 10], [1.0, np.nan, 2.0])
    g = S.make_grid(np.array([0, 1, 10]), 10)
    b = S.band(S.buckets(f, g), g)
    assert b.outlier is None and b.outlier_line is None
    assert b.line[0] == 1.0 and math.isnan(b.line[1]) and b.line[2] == 2.0


def test_nonfinite_points_are_listed_in_order_and_counted():
    f = frame([1, 0, 0, 0], [7, 5, 3, 4], [np.inf, -np.inf, np.nan, 1.0])
    rows, total = S.nonfinite(f)
    assert total == 3
    assert rows == [{"rank": 0, "x": 3, "value": "nan"}, {"rank": 0, "x": 5, "value": "-inf"},
                    {"rank": 1, "x": 7, "value": "inf"}]
    rows, total = S.nonfinite(f, limit=1)
    assert len(rows) == 1 and total == 3


def test_float_axes_get_float_buckets():
    t = np.linspace(1.7e9, 1.7e9 + 3600, 10_000)
    g = S.make_grid(t, 500, integer=False)
    assert g.count == 500 and g.assign(t).max() == 499 and g.assign(t).min() == 0
