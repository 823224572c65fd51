"""add_histogram against numpy (counts, edges, statistics; NaN and ±inf counted apart)
and add_audio through WAV (identical 16-bit samples)."""

from __future__ import annotations

import io
import json
import math
import wave

import numpy as np
import pytest
import torch
from _media_helpers import read_back
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from nblog.reader._runfiles.media import HISTOGRAM_SCHEMA


def check_against_numpy(r, tag, values, bins=64, step=None):
    values = np.asarray(values).reshape(-1)
    df = r.histograms(tag)
    if step is not None:
        df = df.filter(df["step"] == step)
    finite = values[np.isfinite(values)] if values.dtype.kind == "f" else values
    counts, edges = np.histogram(finite.astype(np.float64), bins=bins)
    np.testing.assert_array_equal(df["count"].to_numpy(), counts)
    np.testing.assert_array_equal(df["bin_left"].to_numpy(), edges[:-1])
    np.testing.assert_array_equal(df["bin_right"].to_numpy(), edges[1:])
    assert df["bin"].to_list() == list(range(len(counts)))
    row = df.row(0, named=True)
    f64 = finite.astype(np.float64)
    assert row["num"] == f64.size
    if f64.size:
        assert row["min"] == f64.min() and row["max"] == f64.max()
        assert row["sum"] == pytest.approx(f64.sum(), rel=1e-9, abs=1e-9)
        assert row["sum_squares"] == pytest.approx((f64 * f64).sum(), rel=1e-9, abs=1e-9)
    else:
        assert row["min"] is None and row["max"] is None
    if values.dtype.kind == "f":
        assert row["nan"] == np.isnan(values).sum()
        assert row["pos_inf"] == (values == np.inf).sum()
        assert row["neg_inf"] == (values == -np.inf).sum()
    return df


def test_histogram_of_a_million_float32(make_run):
    values = np.random.default_rng(0).standard_normal(1_000_000).astype(np.float32)
    run = make_run()
    run.add_histogram("w", values, step=10)
    r = read_back(run)
    df = check_against_numpy(r, "w", values)
    assert df["count"].sum() == 1_000_000
    rec = r.media("w").row(0, named=True)
    assert rec["kind"] == "histogram" and rec["bins"] == 64 and rec["step"] == 10


def test_nan_and_inf_are_counted_not_binned(make_run):
    values = np.array([1.0, 2.0, np.nan, np.inf, -np.inf, np.inf, 3.0, np.nan, np.nan], np.float32)
    run = make_run()
    run.add_histogram("h", values, step=0, bins=4)
    run.add_histogram("allnan", np.full(5, np.nan), step=0)
    r = read_back(run)
    df = check_against_numpy(r, "h", values, bins=4)
    row = df.row(0, named=True)
    assert (row["nan"], row["pos_inf"], row["neg_inf"], row["num"]) == (3, 2, 1, 3)
    assert df["count"].sum() == 3
    empty = r.histograms("allnan").row(0, named=True)
    assert (empty["nan"], empty["num"], empty["min"]) == (5, 0, None)


@pytest.mark.parametrize(
    "values, bins",
    [
        (list(range(100)), 10),
        (np.arange(-50, 50, dtype=np.int8), 7),
        (np.array([True, False, True]), 2),
        (np.random.default_rng(1).random((4, 5, 6)), [0.0, 0.1, 0.5, 0.9, 1.0]),
        (np.random.default_rng(2).random(1000), "auto"),
        (np.full(10, 3.0), 5),  # one value: numpy widens the range by 0.5
        (np.random.default_rng(3).standard_normal(1000)[::3], 16),  # not contiguous
    ],
    ids=["list", "int8", "bool", "3-d with edges", "numpy rule", "constant", "strided"],
)
def test_histogram_inputs(make_run, values, bins):
    run = make_run()
    run.add_histogram("h", values, step=1, bins=bins)
    r = read_back(run)
    check_against_numpy(r, "h", np.asarray(values), bins=bins)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64])
def test_histogram_of_tensors(make_run, dtype):
    t = (torch.randn(1000) * 10).to(dtype)
    run = make_run()
    run.add_histogram("t", t, step=0)
    t.zero_()  # the caller's copy was taken
    r = read_back(run)
    df = r.histograms("t")
    assert df["count"].sum() == 1000 and df.row(0, named=True)["num"] == 1000
    assert df["bin_left"].min() < -1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=hnp.arrays(
        np.float64,
        st.integers(1, 200),
        elements=st.one_of(
            st.floats(-1e6, 1e6, allow_nan=False),
            st.sampled_from([math.nan, math.inf, -math.inf]),
        ),
    ),
    bins=st.integers(1, 50),
)
def test_histogram_statistics_match_numpy(make_run, values, bins):
    run = make_run()
    run.add_histogram("h", values, step=0, bins=bins)
    r = read_back(run)
    check_against_numpy(r, "h", values, bins=bins)


def test_histograms_frame_over_steps(make_run):
    run = make_run()
    for step in range(3):
        run.add_histogram("h", np.arange(10) + step, step=step, bins=5)
    run.add_histogram("other", [1, 2, 3], step=0, bins=3)
    r = read_back(run)
    df = r.histograms("h")
    assert df["step"].to_list() == [0] * 5 + [1] * 5 + [2] * 5
    assert df.columns == list(HISTOGRAM_SCHEMA)
    assert r.histograms("h", include_hidden=True)["hidden"].to_list() == [False] * 15
    assert r.histograms(["h", "other"]).height == 18
    assert r.histograms("missing").height == 0
    assert r.media(kind="histogram")["tag"].to_list() == ["h", "h", "h", "other"]


# -- audio ----------------------------------------------------------------------------


def wav_of(r, tag):
    rec = r.media(tag).row(0, named=True)
    with wave.open(io.BytesIO(r.media_bytes(rec))) as w:
        frames = np.frombuffer(w.readframes(w.getnframes()), "<i2")
        return rec, w.getnchannels(), w.getframerate(), w.getsampwidth(), frames.reshape(-1, w.getnchannels())


def test_float_mono_audio(make_run):
    samples = np.sin(np.linspace(0, 200, 8000)) * 1.2  # beyond ±1 is clipped
    run = make_run()
    run.add_audio("a", samples, step=4, sample_rate=8000)
    r = read_back(run)
    rec, channels, rate, width, frames = wav_of(r, "a")
    want = np.rint(np.clip(samples, -1, 1) * 32767).astype(np.int16)
    assert (channels, rate, width) == (1, 8000, 2)
    np.testing.assert_array_equal(frames[:, 0], want)
    assert rec["kind"] == "audio" and rec["format"] == "wav" and rec["sample_rate"] == 8000
    assert json.loads(rec["meta"])["duration_s"] == 1.0


def test_int16_stereo_audio_is_stored_as_is(make_run):
    samples = np.random.default_rng(5).integers(-32768, 32767, size=(2, 1000), dtype=np.int16)
    run = make_run()
    run.add_audio("st", samples, step=0, sample_rate=44100)
    run.add_audio("tb", torch.from_numpy(samples[:1].astype(np.float32) / 32768), step=0, sample_rate=22050)
    r = read_back(run)
    rec, channels, rate, _w, frames = wav_of(r, "st")
    assert (channels, rate, rec["channels"]) == (2, 44100, 2)
    np.testing.assert_array_equal(frames.T, samples)
    _rec, channels, rate, _w, frames = wav_of(r, "tb")  # TensorBoard's (1, L) float form
    assert (channels, rate) == (1, 22050)
    np.testing.assert_array_equal(
        frames[:, 0], np.rint(np.clip(samples[0] / 32768, -1, 1) * 32767).astype(np.int16)
    )
