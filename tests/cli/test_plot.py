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
    # along the whole series: the band's height follows the ranks' timings (the sleeping
    # rank's, longer on a loaded machine), its extent the 100 timed steps
    assert band.any(axis=0).mean() > 0.6, "the min-max band runs across the axes"
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
    # raw: the spike is a stroke over the axes' height (the legend under them takes the
    # rest); smoothed: the line has no such stroke (smoothing after bucketing would
    # still see a 50 in the bucket's max)
    assert tall[raw] > 0.4 and tall[smooth] < 0.1, tall


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
        (["--tag", "train/*"], "--output"),
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


# ---- a series of one point, tag selection, the legend's place (issue 22) ----

SVG = "{http://www.w3.org/2000/svg}"
_NUM = r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?"


@pytest.fixture(scope="module")
def small_root(tmp_path_factory) -> Path:
    """``once-00000001``: steps 0-4, and eval/acc and eval/f1 logged once, at step 4 (final
    metrics);
    ``first-00000002``: one step, step 0 (train/loss = 3 there);
    ``torn-00000003``: a run whose event log was cut inside its first frame of points:
    the tag records are read, no point is."""
    import struct

    root = tmp_path_factory.mktemp("plot1") / "runs"
    write_run(root, "once-00000001", steps=5, final={"eval/acc": 0.93, "eval/f1": 0.9})
    write_run(root, "first-00000002", steps=1, spike_step=0, spike_value=3.0)
    torn = write_run(root, "torn-00000003", steps=50)
    log = torn / "events.r0.s0.log"
    data = log.read_bytes()
    at = 8  # the file header, then frames: 16-byte header (magic, type, length, crc, hcrc), payload
    while at < len(data):
        _magic, kind, length, _crc, _hcrc = struct.unpack_from("<3sBIII", data, at)
        if kind in (3, 8):  # POINTS, COLUMNS
            break
        at += 16 + length
    assert at < len(data), "no frame of points found"
    log.write_bytes(data[: at + 20])  # the header of the points' frame and 4 bytes of it
    return root


def _svg(path: Path):
    import xml.etree.ElementTree as ET

    return ET.parse(path).getroot()


def _box(elements) -> tuple[float, float, float, float]:
    """(x0, y0, x1, y1) in points (y down) of the paths, marker uses and text baselines
    under ``elements``; a text counts from its baseline up by its font size."""
    import re

    xs, ys = [], []
    for top in elements:
        for e in top.iter():
            tag = e.tag.rsplit("}", 1)[-1]
            if tag == "path" and e.get("d") and not e.get("id"):  # ids: marker shapes in <defs>
                nums = [float(v) for v in re.findall(_NUM, e.get("d"))]
                xs += nums[0::2]
                ys += nums[1::2]
            elif tag in ("use", "text") and e.get("x") is not None:
                xs.append(float(e.get("x")))
                ys.append(float(e.get("y")))
                if tag == "text":
                    size = re.search(r"font-size: (" + _NUM + ")px", e.get("style", ""))
                    ys.append(float(e.get("y")) - float(size.group(1)))
    return min(xs), min(ys), max(xs), max(ys)


def _panels(svg) -> list[dict]:
    """Per axes of the figure: its title, its frame (the background patch), its legend's
    box, the x tick labels and the markers drawn in it (fill colour, x, y)."""
    out = []
    for ax in svg.iter(SVG + "g"):
        if not (ax.get("id") or "").startswith("axes_"):
            continue
        groups = {g.get("id"): g for g in ax if g.tag.endswith("}g")}
        frame = _box([groups["patch_" + str(min(int(k[6:]) for k in groups if k.startswith("patch_")))]])
        legend = [g for k, g in groups.items() if k.startswith("legend_")]
        xaxis = next(g for k, g in groups.items() if k.startswith("matplotlib.axis_"))
        ticks = [t.text for g in xaxis if (g.get("id") or "").startswith("xtick_")
                 for t in g.iter(SVG + "text")]
        markers = []
        for k, g in groups.items():
            if k.startswith("line2d_"):
                for use in g.iter(SVG + "use"):
                    fill = use.get("style", "").split("fill: ")[-1].split(";")[0]
                    markers.append((fill, float(use.get("x")), float(use.get("y"))))
        titles = [t.text for k, g in groups.items() if k.startswith("text_") for t in g.iter(SVG + "text")]
        out.append({"title": titles[0] if titles else None, "frame": frame,
                    "legend": _box(legend) if legend else None, "ticks": ticks, "markers": markers})
    return out


def _overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


@pytest.mark.parametrize(("run", "step"), [("once-00000001", 4), ("first-00000002", 0)])
def test_a_series_of_one_point_is_drawn_as_a_dot_in_the_middle(cli, small_root, tmp_path, run, step):
    """A final metric (eval/acc, logged once) or a one-step run: the line has no segment,
    so a dot marks the point, at the middle of an x axis from step-1 to step+1 labelled
    in whole steps; the PNG has the run's colour where the SVG puts the dot."""
    tag = "eval/acc" if run.startswith("once") else "train/loss"
    svg, png = tmp_path / "one.svg", tmp_path / "one.png"
    for out in (svg, png):
        res = plot(cli, small_root, run, "-t", tag, "-o", str(out), "--size", "6,4", "--dpi", "100")
        assert res.exit_code == 0, res.output
    (panel,) = _panels(_svg(svg))
    x0, y0, x1, y1 = panel["frame"]
    dots = [(x, y) for fill, x, y in panel["markers"] if fill == "#1f77b4" and x0 <= x <= x1 and y0 <= y <= y1]
    assert len(dots) == 1, panel["markers"]
    (x, y), = dots
    assert x == pytest.approx((x0 + x1) / 2, abs=0.5)
    labels = [t.replace("\u2212", "-") for t in panel["ticks"]]
    assert [int(t) for t in labels] == list(range(step - 1, step + 2)), labels
    # the same figure as pixels: the dot's colour at the dot's place (points -> pixels)
    img = np.asarray(Image.open(png).convert("RGB")).astype(float)
    px, py = round(x * 100 / 72), round(y * 100 / 72)
    near = img[py - 2 : py + 3, px - 2 : px + 3]
    assert np.all(np.abs(near - C0) <= 30, axis=2).sum() >= 20, near


def test_tags_are_globs_and_default_to_every_tag(cli, root, tmp_path):
    """--tag takes the glob every command takes (tag_matcher); without it every scalar
    and timer tag gets a panel, in name order."""
    out = tmp_path / "g.svg"
    res = plot(cli, root, "spike-00000001", "-t", "train/*", "-o", str(out))
    assert res.exit_code == 0, res.output
    assert [p["title"] for p in _panels(_svg(out))] == ["train/loss", "train/lr"]
    res = plot(cli, root, "spike-00000001", "-t", "time/*", "-t", "no/*", "-o", str(out))
    assert res.exit_code == 0, res.output
    assert "no run has a scalar or timer tag matching 'no/*' on rank 0" in res.stderr
    assert [p["title"] for p in _panels(_svg(out))] == ["time/step"]
    png = tmp_path / "all.png"
    for f in (out, png):
        res = plot(cli, root, "spike-00000001", "other-00000002", "-o", str(f))
        assert res.exit_code == 0, res.output
    assert [p["title"] for p in _panels(_svg(out))] == ["time/step", "train/loss", "train/lr"]
    # the default size: 6.4 in wide, 3.4 in a panel and 0.6 for the title, at 150 dpi
    assert Image.open(png).size == (960, round((0.6 + 3 * 3.4) * 150))


def test_many_panels_go_in_columns_each_labelled(cli, small_root, tmp_path):
    """Five tags: two columns, the second one panel short; the lowest panel of each column
    labels the shared x axis (tick labels), the panels above it do not."""
    out = tmp_path / "grid.svg"
    res = plot(cli, small_root, "once-00000001", "-o", str(out))
    assert res.exit_code == 0, res.output
    panels = _panels(_svg(out))
    assert [p["title"] for p in panels] == ["eval/acc", "eval/f1", "time/step", "train/loss", "train/lr"]
    lefts = [round(p["frame"][0]) for p in panels]
    assert lefts[0] == lefts[2] == lefts[4] < lefts[1] == lefts[3]
    assert [all(p["ticks"]) and len(p["ticks"]) > 1 for p in panels] == [False, False, False, True, True]
    assert 'width="921.6pt"' in out.read_text()  # 2 x 6.4 in


def test_the_legend_never_covers_a_panel(cli, root, tmp_path):
    """The band of every rank fills time/step: a legend inside ("best") covered it. The
    legend goes under its axes, clear of them, of the x labels, and of the panels below."""
    for args in (["--all-ranks", "-t", "time/step"], [], ["-t", "train/loss", "--size", "3,3"]):
        out = tmp_path / "legend.svg"
        res = plot(cli, root, "spike-00000001", "other-00000002", *args, "-o", str(out))
        assert res.exit_code == 0, res.output
        panels = _panels(_svg(out))
        for p in panels:
            assert p["legend"] is not None
            assert p["legend"][1] > p["frame"][3], (args, p)  # below the frame (y grows down)
            for q in panels:
                assert not _overlap(p["legend"], q["frame"]), (args, p["title"], q["title"])
        width = float(out.read_text().split('width="', 1)[1].split("pt", 1)[0])
        for p in panels:
            assert 0 <= p["legend"][0] and p["legend"][2] <= width, (args, p)  # wrapped to fit


def test_a_torn_run_offers_no_tag_it_cannot_read(cli, small_root, tmp_path):
    """Its tag records were read and its points were not: train/loss is not offered as a
    tag to draw (it has no point), and nb plot says so instead of drawing an empty panel."""
    out = tmp_path / "torn.png"
    res = plot(cli, small_root, "torn-00000003", "-t", "train/loss", "-o", str(out))
    assert res.exit_code == 2, res.output
    msg = " ".join(res.stderr.split())
    assert "no run has points of 'train/loss'; no scalar or timer point could be read on rank 0" in msg
    assert "tags" not in msg.split("train/loss", 1)[1]
    res = plot(cli, small_root, "torn-00000003", "-o", str(out))
    assert res.exit_code == 1, res.output
    assert "error: no run has a readable scalar or timer point on rank 0" in res.stderr
    assert not out.exists()
    # beside a run that has points: drawn, and the torn one named
    res = plot(cli, small_root, "torn-00000003", "once-00000001", "-t", "train/loss", "-o", str(out))
    assert res.exit_code == 0, res.output
    assert "torn-00000003 has no points of 'train/loss' on rank 0" in res.stderr
    # its tag records list the tags, the hint lists only tags with points
    res = plot(cli, small_root, "torn-00000003", "once-00000001", "-t", "nope", "-o", str(out))
    assert res.exit_code == 2
    assert "tags with points: eval/acc, eval/f1, time/step, train/loss, train/lr" in " ".join(res.stderr.split())
