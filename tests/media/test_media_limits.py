"""Images larger than Pillow opens are refused at the call; histograms of extreme values
(a range wider than float64, a few ulps, subnormals, one huge value) are binned, not
dropped, with no numpy warning on the user's stderr; an encoding failure's warning
names the tag."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
import warnings

import numpy as np
import pytest
from _media_helpers import dropped, read_back
from PIL import Image

import nblog as nb

M = float(np.finfo(np.float64).max)
TINY = 5e-324  # the smallest subnormal


def png_bytes(width, height) -> bytes:
    buf = io.BytesIO()
    Image.new("L", (width, height)).save(buf, format="PNG")
    return buf.getvalue()


def jpeg_bytes(width, height) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (width, height)).save(buf, format="JPEG")
    return buf.getvalue()


# -- image size -------------------------------------------------------------------

LIMIT = 10_000  # PIL.Image.MAX_IMAGE_PIXELS for these tests (read at each call)

TOO_LARGE = {
    "array HW": ("add_image", lambda: np.zeros((101, 100), np.uint8)),
    "array CHW": ("add_image", lambda: np.zeros((3, 50, 201), np.uint8)),
    "float array": ("add_image", lambda: np.zeros((100, 101, 3), np.float32)),
    "PIL image": ("add_image", lambda: Image.new("RGB", (200, 51))),
    "PNG bytes": ("add_image", lambda: png_bytes(10_001, 1)),
    "grid of 16": ("add_images", lambda: np.zeros((16, 30, 30), np.uint8)),  # 240 x 60 pixels
}
FITS = {
    "array HW": ("add_image", lambda: np.zeros((100, 100), np.uint8)),
    "PIL image": ("add_image", lambda: Image.new("RGB", (200, 50))),
    "PNG bytes": ("add_image", lambda: png_bytes(10_000, 1)),
    "grid of 8": ("add_images", lambda: np.zeros((8, 30, 30), np.uint8)),  # 240 x 30 pixels
}


@pytest.mark.parametrize("name", list(TOO_LARGE))
def test_an_image_larger_than_pillow_opens_is_skipped_warned_and_counted(make_run, caplog, monkeypatch, name):
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", LIMIT)
    caplog.set_level(logging.WARNING, "nblog")
    method, make = TOO_LARGE[name]
    run = make_run()
    for _ in range(2):
        getattr(run, method)("big", make(), step=1)
    run.add_image("ok", np.zeros((4, 4), np.uint8), step=1)
    r = read_back(run)
    assert r.media()["tag"].to_list() == ["ok"]
    assert dropped(run) == {"bad_media": 2}
    (warning,) = [rec.getMessage() for rec in caplog.records if "the point is skipped" in rec.getMessage()]
    assert "'big'" in warning and "MAX_IMAGE_PIXELS = 10000" in warning and __file__ in warning


@pytest.mark.parametrize("name", list(TOO_LARGE))
def test_an_image_larger_than_pillow_opens_raises_with_nb_strict(make_run, monkeypatch, name):
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", LIMIT)
    method, make = TOO_LARGE[name]
    run = make_run(env={"NB_STRICT": "1"})
    with pytest.raises(nb.StrictModeError, match="larger than Pillow opens"):
        getattr(run, method)("big", make(), step=1)


@pytest.mark.parametrize("name", list(FITS))
def test_an_image_at_the_limit_is_stored_and_opens(make_run, monkeypatch, name):
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", LIMIT)
    method, make = FITS[name]
    run = make_run()
    getattr(run, method)("fits", make(), step=1)
    r = read_back(run)
    assert dropped(run) == {}
    (rec,) = r.media("fits").iter_rows(named=True)
    assert rec["width"] * rec["height"] <= LIMIT
    r.image(rec)  # Pillow opens it


def test_no_limit_when_pillow_has_none(make_run, monkeypatch):
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", None)
    run = make_run()
    run.add_image("big", np.zeros((101, 100), np.uint8), step=1)
    r = read_back(run)
    assert r.media("big").height == 1 and dropped(run) == {}


def test_a_jpeg_larger_than_pillow_opens_is_dropped_in_the_writer_naming_its_tag(make_run, caplog, monkeypatch):
    data = jpeg_bytes(200, 60)  # made before lowering the limit
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", LIMIT)
    caplog.set_level(logging.WARNING, "nblog")
    run = make_run()
    run.add_image("big/jpeg", data, step=3)
    run.add_image("ok", jpeg_bytes(100, 100), step=3)
    r = read_back(run)
    assert r.media()["tag"].to_list() == ["ok"]
    assert dropped(run) == {"bad_media": 1}
    (msg,) = [rec.getMessage() for rec in caplog.records if "cannot encode" in rec.getMessage()]
    assert "'big/jpeg'" in msg and "step 3" in msg


def test_the_default_limit_refuses_20000_squared_without_importing_pillow(tmp_path):
    code = f"""
import sys
import numpy as np
import nblog as nb
run = nb.init("p", root={str(tmp_path)!r}, system=False)
run.add_image("x", np.zeros((20000, 20000), np.uint8), step=1)  # 400 million pixels, never touched
assert "PIL" not in sys.modules, "the size check imported Pillow"
run.finish()
r = nb.RunReader(run.dir)
assert r.media().height == 0, r.media()
assert r.sessions()[0]["dropped"] == {{"bad_media": 1}}, r.sessions()[0]["dropped"]
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "20000x20000 = 400000000 pixels is larger than Pillow opens" in p.stderr
    assert "'x'" in p.stderr


# -- histograms of extreme values ----------------------------------------------------

EXTREME = {
    "±1e308": np.array([-1e308, 1e308]),
    "±max": np.array([-M, M, 0.0, 1.0]),
    "±max many": np.array([-M, M] * 500 + [0.0] * 100),
    "0 and max": np.array([0.0, M]),
    "tiny range": np.array([1.0, 1.0 + 1e-15]),
    "two ulps at 1e300": np.array([1e300, np.nextafter(1e300, np.inf)]),
    "subnormals": np.array([TINY, 2 * TINY, 0.0]),
    "all one subnormal": np.full(3, TINY),
    "all equal": np.full(10, 3.0),
    "all 1e308": np.full(5, 1e308),
    "all max": np.full(5, M),
    "all -max": np.full(5, -M),
    "with NaN and inf": np.array([np.nan, np.inf, -np.inf, -1e308, 1e308]),
    "float32 max": np.array([-3.4e38, 3.4e38], np.float32),
    "int64 extremes": np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max]),
}


@pytest.mark.parametrize("bins", [64, 1, "auto", "fd", "sturges", "sqrt"])
@pytest.mark.parametrize("name", list(EXTREME))
def test_histograms_of_extreme_values_match_numpy(make_run, name, bins):
    values = EXTREME[name]
    run = make_run()
    with warnings.catch_warnings(record=True) as caught:  # the writer thread's too
        warnings.simplefilter("always")
        run.add_histogram("h", values, step=1, bins=bins)
        r = read_back(run)
    assert not [w for w in caught if "numpy" in w.filename or issubclass(w.category, RuntimeWarning)], \
        [str(w.message) for w in caught]
    assert dropped(run) == {}
    df = r.histograms("h")
    left, right, counts = df["bin_left"].to_numpy(), df["bin_right"].to_numpy(), df["count"].to_numpy()
    edges = np.append(left, right[-1])
    assert np.isfinite(edges).all() and (edges[1:] > edges[:-1]).all(), edges
    finite = values[np.isfinite(values)].astype(np.float64)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(counts, np.histogram(finite, bins=edges)[0])
        try:
            expected = np.histogram(finite, bins=bins)
        except Exception:  # numpy cannot bin these: every value is still in a bin
            expected = None
        row = df.row(0, named=True)
        assert counts.sum() == row["num"] == finite.size
        assert row["min"] == finite.min() and row["max"] == finite.max()
        np.testing.assert_array_equal(row["sum"], finite.sum())  # NaN where numpy's sum is
        np.testing.assert_array_equal(row["sum_squares"], np.dot(finite, finite))
    if expected is not None and np.isfinite(expected[1]).all() and (expected[1][1:] > expected[1][:-1]).all():
        np.testing.assert_array_equal(counts, expected[0])  # where numpy can, numpy's own bins
        np.testing.assert_array_equal(edges, expected[1])
    if values.dtype.kind == "f":
        assert (row["nan"], row["pos_inf"], row["neg_inf"]) == (
            int(np.isnan(values).sum()), int((values == np.inf).sum()), int((values == -np.inf).sum()))


def test_extreme_histogram_prints_nothing_on_stderr(tmp_path):
    code = f"""
import numpy as np
import nblog as nb
run = nb.init("p", root={str(tmp_path)!r}, system=False)
run.add_histogram("h", np.array([-1e308, 1e308]), step=1)
run.add_histogram("h", np.array([-np.finfo(np.float64).max] * 3 + [np.finfo(np.float64).max] * 3), step=2)
run.finish()
r = nb.RunReader(run.dir)
print(r.histograms("h")["count"].sum(), r.sessions()[0]["dropped"])
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["8", "{}"], p.stdout
    assert p.stderr == "", p.stderr


def test_histogram_meta_with_infinite_sums_reads_back_as_json(make_run):
    run = make_run()
    run.add_histogram("h", np.array([-M, M, M]), step=1)
    r = read_back(run)
    meta = json.loads(r.media("h").row(0, named=True)["meta"])
    assert meta["sum"] == M and meta["sum_squares"] == float("inf")
