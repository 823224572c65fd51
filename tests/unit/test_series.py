"""nbcli.series (arrays): EMA, min/max display downsampling, non-finite markers, bands."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nbcli.series import (
    ema,
    minmax_indices,
    nonfinite_indices,
    per_step_totals,
    session_starts,
    step_band,
)


def reference_ema(values, w, last=0.0, count=0):
    """TensorBoard's loop: a non-finite point is skipped and keeps its own value."""
    out = []
    for v in values:
        if not math.isfinite(v):
            out.append(v)
            continue
        last = last * w + (1 - w) * v
        count += 1
        out.append(last / (1 - w**count))
    return np.array(out)


@pytest.mark.parametrize("w", [0.0, 0.3, 0.6, 0.9, 0.99, 0.999])
def test_ema_matches_the_loop_and_resumes(w):
    v = np.random.default_rng(1).normal(size=5000) * 10 + 3
    v[[7, 100, 2000]] = [np.nan, np.inf, -np.inf]
    full, _ = ema(v, w)
    np.testing.assert_allclose(full, reference_ema(v, w), rtol=1e-9, atol=1e-12)
    a, state = ema(v[:1234], w)
    b, _ = ema(v[1234:], w, state)
    np.testing.assert_allclose(np.concatenate([a, b]), full, rtol=1e-12, atol=1e-12)
    # the one rule for every viewer: NaN and ±inf stay as they are (TensorBoard's answer)
    assert np.isnan(full[7]) and full[100] == np.inf and full[2000] == -np.inf


def test_ema_edges():
    out, state = ema(np.array([np.nan, np.nan]), 0.6)
    assert np.isnan(out).all() and state.count == 0
    out, _ = ema(np.array([5.0]), 0.6)
    assert out[0] == pytest.approx(5.0)  # debiased: the first point is itself
    with pytest.raises(ValueError):
        ema(np.array([1.0]), 1.0)


def test_minmax_keeps_spikes_and_bounds_the_count():
    y = np.sin(np.arange(1_000_000) / 1000.0)
    y[123_457] = 50.0
    y[876_543] = -50.0
    y[5] = np.nan
    idx = minmax_indices(y, 400)
    assert len(idx) <= 802 and np.all(np.diff(idx) > 0)
    assert idx[0] == 0 and idx[-1] == len(y) - 1
    assert 123_457 in idx and 876_543 in idx
    assert not np.isnan(y[idx]).any()
    small = np.array([1.0, np.nan, 3.0])
    assert minmax_indices(small, 400).tolist() == [0, 2]


def test_nonfinite_and_session_starts():
    y = np.array([1.0, np.nan, np.inf, -np.inf, 2.0])
    bad = nonfinite_indices(y)
    assert bad["nan"].tolist() == [1] and bad["+inf"].tolist() == [2] and bad["-inf"].tolist() == [3]
    assert session_starts(np.array([0, 0, 1, 1, 3]), np.array([0.0, 1, 2, 3, 4])) == [(1, 2.0), (3, 4.0)]
    assert session_starts(np.array([0]), np.array([0.0])) == []


def test_per_step_totals_and_band():
    steps, totals = per_step_totals(np.array([0, 0, 1, 2, 2, 2]), np.array([1.0, 2, 3, 1, 1, 1]))
    assert steps.tolist() == [0, 1, 2] and totals.tolist() == [3.0, 3.0, 3.0]
    steps, totals = per_step_totals(np.array([2, 0, 2]), np.array([1.0, 5, 1]))
    assert steps.tolist() == [0, 2] and totals.tolist() == [5.0, 2.0]
    b = step_band({0: (np.array([0, 1]), np.array([1.0, 2])), 1: (np.array([0, 1]), np.array([3.0, 4])),
              2: (np.array([1]), np.array([10.0]))})
    assert b.step.tolist() == [0, 1]
    assert b.lo.tolist() == [1.0, 2.0] and b.hi.tolist() == [3.0, 10.0]
    assert b.median.tolist() == [2.0, 4.0] and b.ranks.tolist() == [2, 3]
    assert len(step_band({}).step) == 0


def test_step_band_leaves_nonfinite_values_out():
    """The one rule for NaN and ±inf: never in a band (a rank's +inf total is not the
    band's max, a NaN is not counted in the median)."""
    b = step_band({0: (np.array([0, 1, 2]), np.array([1.0, np.inf, np.nan])),
                   1: (np.array([0, 1, 2]), np.array([2.0, 3.0, 4.0])),
                   2: (np.array([0, 1, 2]), np.array([3.0, 5.0, 6.0])),
                   3: (np.array([1]), np.array([-np.inf]))})
    assert b.step.tolist() == [0, 1, 2]
    assert b.lo.tolist() == [1.0, 3.0, 4.0] and b.hi.tolist() == [3.0, 5.0, 6.0]
    assert b.median.tolist() == [2.0, 4.0, 5.0] and b.ranks.tolist() == [3, 2, 2]
    assert len(step_band({0: (np.array([0]), np.array([np.nan]))}).step) == 0


def test_import_nblog_does_not_load_them():
    import subprocess
    import sys

    code = "import sys, nblog; print([m for m in ('nbcli.series', 'nblog.reader._views.live', 'numpy') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_decimator_incremental_equals_fresh():
    from nbcli.series import Decimator

    rng = np.random.default_rng(0)
    y = rng.normal(size=100_000)
    y[rng.integers(0, len(y), 500)] = np.nan
    d = Decimator(100)
    n = 0
    for step in (1, 5, 100, 1000, 3, 50_000, 7, 48_884):
        n = min(len(y), n + step)
        got = d.update(y[:n])
        np.testing.assert_array_equal(got, Decimator(100).update(y[:n]))
        finite = np.flatnonzero(np.isfinite(y[:n]))
        for i in (np.nanargmin(y[:n]), np.nanargmax(y[:n]), finite[0], finite[-1]):
            assert i in got
        assert len(got) <= 4 * 100 + 2
    assert len(Decimator(10).update(np.array([np.nan, np.nan]))) == 0
