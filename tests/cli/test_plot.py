"""``nb plot``: figures of runs written by real rank processes, read back as pixels
(Pillow) and as SVG text."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))
from report_helpers import write_run  # noqa: E402

C0 = np.array([0x1F, 0x77, 0xB4])  # the first run's colour
BAND = 255 - 0.25 * (255 - C0)  # that colour at the band's alpha over white
SPIKE_STEP, STEPS = 1950, 3000


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("plot") / "runs"
    write_run(root, "spike-00000001", world=4, steps=STEPS, spike_step=SPIKE_STEP, spike_value=50.0, nan=[500],
              inf=[700], slow_rank=2, timed_steps=100)
    write_run(root, "other-00000002", world=1, steps=2000)
    return root


def plot(cli, root, *args):
    return cli("plot", "--root", str(root), *args)


def pixels_like(img: Image.Image, colour: np.ndarray, tol: float = 6) -> np.ndarray:
    a = np.asarray(img.convert("RGB")).astype(float)
    return np.all(np.abs(a - colour) <= tol, axis=2)


@pytest.mark.parametrize(("size", "dpi"), [("5,3", 80), ("6.4,4", 100), ("3,3", 200)])
def test_png_has_the_requested_pixel_size(cli, root, tmp_path, size, dpi):
    out = tmp_path / "f.png"
    res = plot(cli, root, "spike-00000001", "--tag", "train/loss", "-o", str(out), "--size", size, "--dpi", str(dpi))
    assert res.exit_code == 0, res.output
    w, h = (float(v) for v in size.split(","))
    assert Image.open(out).size == (round(w * dpi), round(h * dpi))


def test_svg_and_pdf_have_the_requested_size_and_text(cli, root, tmp_path):
    svg, pdf = tmp_path / "f.svg", tmp_path / "f.pdf"
    for out in (svg, pdf):
        res = plot(cli, root, "spike-00000001", "other-00000002", "--tag", "train/loss", "-o", str(out), "--size", "5,3")
        assert res.exit_code == 0, res.output
    text = svg.read_text()
    assert 'width="360pt" height="216pt"' in text
    # the title and the legend name both runs; the non-finite points are counted
    assert text.count("spike-00000001") >= 2 and "other-00000002" in text
    assert "spike-00000001: 2 non-finite (+inf, NaN) at the edge" in text
    head = pdf.read_bytes()
    assert head.startswith(b"%PDF") and b"/MediaBox [ 0 0 360 216 ]" in head


def _longest_run(column: np.ndarray) -> int:
    """The longest run of consecutive True values."""
    edges = np.diff(np.concatenate([[0], column.astype(np.int8), [0]]))
    starts, stops = np.nonzero(edges == 1)[0], np.nonzero(edges == -1)[0]
    return int((stops - starts).max()) if len(starts) else 0


def _tallest_stroke(img: Image.Image) -> tuple[int, int, np.ndarray]:
    """(column, height in pixels) of the tallest vertical run of the first run's colour,
    and every column's height (the legend's sample and the markers are short)."""
    line = pixels_like(img, C0, tol=30)
    heights = np.array([_longest_run(c) for c in line.T])
    col = int(np.argmax(heights))
    return col, int(heights[col]), heights


def test_the_planted_spike_is_drawn(cli, root, tmp_path):
    out = tmp_path / "spike.png"
    res = plot(cli, root, "spike-00000001", "--tag", "train/loss", "-o", str(out), "--size", "8,4", "--dpi", "100")
    assert res.exit_code == 0, res.output
    img = Image.open(out)
    col, height, heights = _tallest_stroke(img)
    assert height > 0.5 * img.size[1], "the spike rises over most of the figure"
    # the series elsewhere (0.5..1.5 against a spike of 50) is flat: columns a few
    # percent away are short
    w = img.size[0]
    for d in (-0.05, 0.05):
        assert heights[int(col + d * w)] < 0.05 * img.size[1]
    # and it sits at step 1,950 of 0..2,999 along the line's extent
    cols = np.nonzero(heights)[0]
    line = pixels_like(img, C0, tol=30)
    data_cols = [c for c in cols if line[int(img.size[1] * 0.5):, c].any()]  # the line runs low in the axes
    left, right = min(data_cols), max(data_cols)
    assert (col - left) / (right - left) == pytest.approx(SPIKE_STEP / (STEPS - 1), abs=0.02)


def test_all_ranks_draws_the_band_and_names_the_outlier(cli, root, tmp_path):
    png, svg = tmp_path / "band.png", tmp_path / "band.svg"
    for out in (png, svg):
        res = plot(cli, root, "spike-00000001", "--all-ranks", "--tag", "time/step", "-o", str(out))
        assert res.exit_code == 0, res.output
    band = pixels_like(Image.open(png), BAND, tol=4)
    assert band.mean() > 0.05, "the min-max band fills a good part of the axes"
    text = svg.read_text()
    assert "spike-00000001: min–max of 4 ranks" in text
    assert "spike-00000001: median" in text
    assert "spike-00000001: rank 2 (farthest from the median)" in text


@pytest.mark.parametrize("x", ["wall", "active"])
def test_a_band_on_a_time_axis_compares_ranks_at_the_same_steps(cli, root, tmp_path, x):
    """The slow rank's clock runs far ahead of the others': cut along time, its late
    buckets would hold it alone (the median = the slow rank) and another rank would be
    named; cut along steps, the slow rank is the outlier, drawn at the ranks' median time."""
    out = tmp_path / "band.svg"
    res = plot(cli, root, "spike-00000001", "--all-ranks", "--tag", "time/step", "--x", x, "-o", str(out))
    assert res.exit_code == 0, res.output
    assert "spike-00000001: rank 2 (farthest from the median)" in out.read_text()


def test_smoothing_x_axes_and_log_scales(cli, root, tmp_path):
    for args, label in ((["--x", "wall"], "wall time since the first point"),
                        (["--x", "active", "--logy"], "active time (queue gaps left out)"),
                        (["--smooth", "0.9", "--logx"], "step")):
        out = tmp_path / "x.svg"
        res = plot(cli, root, "spike-00000001", "--tag", "train/loss", "--tag", "train/lr", "-o", str(out), *args)
        assert res.exit_code == 0, res.output
        text = out.read_text()
        assert label in text
        assert "train/lr" in text and "train/loss" in text
    assert "(smoothed, EMA 0.9)" in text


def test_smoothing_happens_before_bucketing(cli, root, tmp_path):
    """At 0.99 the spike of 50 (one step) is averaged into ~100 steps: the smoothed
    line's top is far lower than the raw spike, even though both figures bucket
    3,000 steps into a few hundred pixels."""
    raw, smooth = tmp_path / "raw.png", tmp_path / "smooth.png"
    for out, extra in ((raw, []), (smooth, ["--smooth", "0.99"])):
        res = plot(cli, root, "spike-00000001", "--tag", "train/loss", "-o", str(out), "--dpi", "50", *extra)
        assert res.exit_code == 0, res.output
    tall = {}
    for out in (raw, smooth):
        img = Image.open(out)
        tall[out] = _tallest_stroke(img)[1] / img.size[1]
    # raw: the spike is a stroke over most of the height; smoothed: the line has no such
    # stroke (smoothing after bucketing would still see a 50 in the bucket's max)
    assert tall[raw] > 0.5 and tall[smooth] < 0.3, tall


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tag", "train/loss", "-o", "f.jpg"], "must end in .png, .svg or .pdf"),
        (["--tag", "train/loss", "-o", "f.png", "--rank", "1", "--all-ranks"], "exclude each other"),
        (["--tag", "train/loss", "-o", "f.png", "--smooth", "1.5"], "is not in [0, 1)"),
        (["--tag", "train/loss", "-o", "f.png", "--size", "wide"], "is not W,H in inches"),
        (["--tag", "train/loss", "-o", "f.png", "--size", "0,3"], "must be in (0, 100]"),
        (["--tag", "train/loss", "-o", "f.png", "--size", "100,100", "--dpi", "2400"], "pixels a side"),
        (["--tag", "no/such", "-o", "f.png"], "no run has points of 'no/such'"),
        (["--tag", "train/loss", "-o", "missing/dir/f.png"], "does not exist"),
        (["-o", "f.png"], "--tag"),
        (["--tag", "train/loss", "-o", "f.png", "--x", "epoch"], "--x"),
    ],
)
def test_bad_input_is_a_usage_error(cli, root, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    res = plot(cli, root, "spike-00000001", *args)
    assert res.exit_code == 2, res.output
    assert message in " ".join(res.stderr.split())
    assert "Traceback" not in res.output
    assert not (tmp_path / "f.png").exists()


def test_an_unknown_run_is_an_error_without_traceback(cli, root, tmp_path):
    res = plot(cli, root, "nope", "--tag", "train/loss", "-o", str(tmp_path / "f.png"))
    assert res.exit_code == 1
    assert "error: no run matches 'nope'" in res.stderr


def test_a_run_without_the_tag_is_skipped_with_a_warning(cli, root, tmp_path):
    out = tmp_path / "f.png"
    res = plot(cli, root, "spike-00000001", "other-00000002", "--tag", "time/step", "--rank", "3", "-o", str(out))
    assert res.exit_code == 0, res.output
    assert "other-00000002 has no points of 'time/step' on rank 3" in res.stderr
    assert out.exists()


def test_plot_and_report_of_a_resumed_run_on_two_machines(cli, runs, tmp_path):
    """The shared CLI run: 3 ranks on two machines, resumed at step 10 (session 0's
    steps 10-19 hidden), NaN at step 5, a straggler on rank 2."""
    import json
    import re

    out = tmp_path / "resumed.png"
    res = cli("plot", "ddp-00000001", "--root", str(runs), "--tag", "train/loss", "--x", "active", "-o", str(out))
    assert res.exit_code == 0, res.output
    assert Image.open(out).size == (960, 600)
    page = tmp_path / "resumed.html"
    res = cli("report", "ddp-00000001", "--root", str(runs), "-o", str(page))
    assert res.exit_code == 0, res.output
    data = json.loads(re.search(r'id="nb-data">(.*?)</script>', page.read_text(), re.S).group(1))
    (run,) = data["runs"]
    assert [s["session"] for s in run["sessions"]] == [0, 1]
    loss = next(c for c in data["charts"] if c["tag"] == "train/loss")
    (series,) = loss["series"]
    assert loss["x"] == list(range(25))  # steps 0-24 once each: the replaced ones hidden
    assert series["nonfinite"] == [{"rank": 0, "x": 5, "value": "nan"}]
    (step,) = run["timers"]
    assert step["stragglers"] == [2]
    assert sorted(m["hostname"] for m in run["system"]) == ["node-a", "node-b"]
