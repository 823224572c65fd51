"""The media view's drawing without an app: histogram bars and heat strip, image
fitting, the choice of image method, and importing textual-image without asking the
terminal anything."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time

import numpy as np
import pytest

from nbcli.tui.media import MediaData, MediaRecord
from nbcli.tui.widgets.histogram import (
    HistogramData,
    axis_labels,
    bar_chart,
    bins_per_bar,
    heat_caption,
    heat_rows,
    heat_strip,
    resample,
    steps_per_row,
)
from nbcli.tui.widgets.mediapane import head_text, middle_cut
from nbcli.tui.widgets.picture import fit_cells, pick_mode

pytestmark = pytest.mark.timing  # run again beside a CPU hog: scripts/test_loaded.sh


def test_resample_keeps_every_count():
    edges = np.array([0.0, 1.0, 2.0, 4.0])
    counts = np.array([10, 20, 40])
    grid = np.linspace(-1.0, 5.0, 13)
    out = resample(edges, counts, grid)
    assert out.sum() == pytest.approx(70)
    # a bin spread evenly: [2, 4) holds 40, so [2, 2.5) holds 10
    assert out[np.searchsorted(grid, 2.0)] == pytest.approx(10)
    # every value equal (numpy's edges around one value): all of it in one column
    one = resample(np.array([3.0, 3.0]), np.array([5]), grid)
    assert one.sum() == 5 and np.count_nonzero(one) == 1


def test_bar_chart_size_axis_and_summed_bins():
    edges = np.linspace(-1, 1, 65)
    counts = np.arange(64)
    text = bar_chart(edges, counts, 40, 10)
    lines = text.plain.split("\n")
    assert len(lines) == 10 and all(len(line) <= 40 for line in lines)
    assert bins_per_bar(counts, 40) == 2  # 64 bins in 36 columns: two bins a bar
    # the count axis goes to the tallest bar, bins 62 + 63 summed
    assert lines[0].startswith("125┤") and lines[7].startswith("  0┤")
    assert "-1" in lines[-1] and lines[-1].rstrip().endswith("1")
    assert lines[0].rstrip().endswith("█")
    assert lines[7][4] == "▁" and lines[6][4] == " "  # bins 0 and 1 hold 0 + 1: one eighth, no more
    assert bar_chart(edges, counts, 5, 3).plain.startswith("(no room")


def test_heat_rows_are_shares_and_buckets_of_steps():
    steps = np.arange(0, 100, 10)
    edges = [np.linspace(s, s + 10, 9) for s in steps]
    counts = [np.full(8, 5 + s) for s in steps]
    data = HistogramData("w", steps, edges, counts, selected=7)
    share, starts, grid = heat_rows(data, 30, 4)
    assert share.shape == (4, 30) and list(starts) == [0, 3, 6, 9]  # 3 steps a row, the last one what is left
    assert np.allclose(share.sum(axis=1), 1.0)  # each row: the shares of its steps' values
    assert grid[0] == 0 and grid[-1] == 100
    text = heat_strip(data, 40, 5).plain.split("\n")
    assert len(text) == 5
    assert text[2].startswith("▶ 60")  # the row of the selected step (index 7, step 70: row 60-80)
    # the oldest row is shaded on the left, the newest on the right
    assert text[0][5:10].strip() and not text[0][-10:].strip()
    assert text[3][-5:].strip()


def lines_fit(text, width: int) -> list[str]:
    lines = text.plain.split("\n")
    assert all(len(line) <= width for line in lines), [line for line in lines if len(line) > width]
    return lines


def test_axis_labels_stay_inside_the_width():
    heat = lambda x: -0.5 + 2.0 * x / 61  # noqa: E731 - a heat strip from -0.5 to 1.5 in 61 columns
    line = axis_labels(61, heat)
    assert len(line) == 61 and line.startswith("-0.5 ") and line.endswith(" 1.5")
    # the middle label names the value under it: 0.5, centred on the middle
    assert line.split() == ["-0.5", "0.5", "1.5"]
    assert abs(line.index("0.5", 5) + 1.5 - 30.5) <= 0.5
    # no room for the middle: left out; no room for both ends: only the left one
    assert axis_labels(10, lambda x: -0.5 + 0.2 * x).split() == ["-0.5", "1.5"]
    assert axis_labels(6, lambda x: 1000.25 + x) == "1000  "
    assert axis_labels(3, lambda x: 123456.0) == "123"
    assert axis_labels(0, heat) == ""
    # the middle rounded to what a column holds, not to noise: 0, not 0.00013
    assert axis_labels(40, lambda x: -2.0 + 4.0 * x / 40 + 0.00013).split()[1] == "0"


@pytest.mark.parametrize("width", [46, 66, 80])
def test_one_bin_bars_keep_their_labels_on_the_line(width):
    edges, counts = np.array([-0.5, 2.002]), np.array([500])
    lines = lines_fit(bar_chart(edges, counts, width, 8), width)
    axis = lines[-1]
    assert axis.rstrip().endswith("2.002") and len(axis) <= width
    left, mid, right = axis.split()  # the middle label is there
    assert (left, right) == ("-0.5", "2.002")
    # and names the value at the column under its centre (to what half a column holds)
    x0 = lines[-2].index("└") + 1  # the first column of the bar
    plot_w = len(lines[-2]) - x0
    centre = axis.index(" " + mid + " ") + 1 + len(mid) / 2 - x0
    cell = 2.502 / plot_w
    assert abs(float(mid) - (-0.5 + 2.502 * centre / plot_w)) <= cell
    assert abs(centre - plot_w / 2) <= 0.5


@pytest.mark.parametrize("bins", [64, 1000, 100_000])
def test_many_bins_bars_keep_their_labels_on_the_line(bins):
    edges = np.linspace(-0.9497, 2.533, bins + 1)
    counts = np.random.default_rng(1).integers(0, 50, bins)
    for width in (46, 66):
        lines = lines_fit(bar_chart(edges, counts, width, 8), width)
        assert lines[-1].rstrip().endswith("2.533") and lines[-1].lstrip().startswith("-0.9497")
        assert len(lines[-1].split()) == 3


def test_bars_middle_label_is_the_value_at_that_column():
    # 7 bins of 0.1 from -1: the old label named the edge of bar 3 (-0.7), left of the middle
    edges = np.round(np.linspace(-1.0, -0.3, 8), 10)
    lines = bar_chart(edges, np.arange(1, 8), 40, 6).plain.split("\n")
    assert lines[-1].split() == ["-1", "-0.65", "-0.3"]


def test_empty_histogram_says_so():
    # every value NaN: numpy's made-up edges 0..1 and no counts
    bars = bar_chart(np.linspace(0, 1, 11), np.zeros(10, np.int64), 60, 8).plain
    assert "no finite values" in bars and "┤" not in bars
    data = HistogramData("h", np.array([0]), [np.linspace(0, 1, 11)], [np.zeros(10, np.int64)], selected=0)
    strip = heat_strip(data, 60, 3).plain
    assert "no finite values" in strip and "0.5" not in strip
    # an empty step next to ones with values: the value range is theirs, not 0..1
    data = HistogramData("h", np.array([0, 1]), [np.linspace(0, 1, 11), np.array([5.0, 6.0, 7.0])],
                         [np.zeros(10, np.int64), np.array([3, 4])])
    _share, _starts, grid = heat_rows(data, 20, 4)
    assert grid[0] == 5 and grid[-1] == 7


def test_heat_rows_group_as_the_caption_says():
    steps = np.arange(1, 21)
    data = HistogramData("w", steps, [np.array([0.0, 1.0, 2.0])] * 20, [np.array([1, 1])] * 20)
    for rows in (17, 10, 7, 4, 20, 40):
        per, used = steps_per_row(20, rows)
        _share, starts, _grid = heat_rows(data, 30, rows)
        assert len(starts) == used <= rows and list(np.diff(starts)) == [per] * (used - 1)
        caption = heat_caption(data, rows).plain
        assert (f", {per} per row" in caption) == (per > 1) and "~" not in caption
        labels = [int(line.split("│")[0].strip(" ▶")) for line in heat_strip(data, 40, rows + 1).plain.split("\n")[:-1]]
        assert labels == list(steps[::per])  # no skipped steps: every row starts per steps later


def test_head_keeps_step_kind_and_caption_with_a_long_tag():
    tag = "experiments/" + "very_long_component_name/" * 8 + "final_image"
    rec = MediaRecord(rank=0, session=0, step=7, tag=tag, kind="image", format="png", offset=0, length=1,
                      width=32, height=24, channels=3, caption="[b]the caption[/b]")
    for width in (40, 50, 66, 120):
        head = head_text(MediaData(0, [rec], record=rec), width).plain
        assert len(head) <= width
        assert head.startswith("experi") and "…" in head and "image  step 7  image" in head
        assert "  [b]the" in head  # the caption starts on the line, literally (not markup)
        assert "[b]the caption[/b]" in head or width < 66
    full = head_text(MediaData(0, [rec], record=rec)).plain
    assert full.startswith(tag) and "session 0" in full
    assert middle_cut("abcdefghij", 5) == "ab…ij" and middle_cut("abc", 5) == "abc"
    assert middle_cut("日本語のタグ", 5) == "日…グ"


def test_fit_cells_keeps_the_aspect_ratio():
    assert fit_cells(32, 24, 66, 24) == (64, 24)  # cells twice as high as wide
    assert fit_cells(100, 10, 40, 40) == (40, 2)
    assert fit_cells(10, 1000, 40, 10) == (1, 10)
    assert fit_cells(0, 10, 40, 10) == (1, 1)


@pytest.mark.parametrize(
    ("mode", "env", "tty", "want"),
    [
        ("halfblock", {"TERM": "xterm-kitty"}, True, "halfblock"),
        ("sixel", {}, False, "sixel"),
        ("auto", {"TERM": "xterm-kitty"}, True, "kitty"),
        ("auto", {"TERM": "xterm-256color", "KITTY_WINDOW_ID": "1"}, True, "kitty"),
        ("auto", {"TERM": "xterm-kitty", "TMUX": "/tmp/tmux-0/default,1,0"}, True, "halfblock"),
        ("auto", {"TERM": "screen-256color"}, True, "halfblock"),
        ("auto", {"TERM_PROGRAM": "WezTerm", "TERM": "xterm-256color"}, True, "sixel"),
        ("auto", {"TERM": "foot"}, True, "sixel"),
        ("auto", {"TERM": "xterm-256color"}, True, "halfblock"),
        ("auto", {"TERM": "xterm-kitty"}, False, "halfblock"),
        ("bogus", {"TERM": "xterm-256color"}, True, "halfblock"),
    ],
)
def test_pick_mode(mode, env, tty, want):
    assert pick_mode(mode, env, tty) == want


CHILD = r"""
import sys
import nbcli.tui.app  # the app and its screens do not import textual-image
assert "textual_image" not in sys.modules, "textual_image imported with the app"
from nbcli.tui.widgets.picture import image_widget_class
cls = image_widget_class(sys.argv[1])
print("OK", cls.__name__, file=sys.stderr)
"""

PLAIN = "import textual_image.widget\n"  # what the module avoids: the import queries the terminal


def run_in_pty(code: str, *args: str) -> tuple[bytes, str, float]:
    """Run ``code`` with stdin and stdout on a new pseudo-terminal that never answers;
    returns (what it wrote to the terminal, its stderr, seconds)."""
    import pty

    master, slave = pty.openpty()
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdin=slave, stdout=slave,
                            stderr=subprocess.PIPE, env={**os.environ, "TERM": "xterm-256color"})
    os.close(slave)
    out = b""
    try:
        _, err = proc.communicate(timeout=60)
        while select.select([master], [], [], 0.2)[0]:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    return out, err.decode(errors="replace"), time.monotonic() - t0


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX pseudo-terminals")
@pytest.mark.parametrize("mode", ["halfblock", "kitty"])
def test_textual_image_is_imported_without_asking_the_terminal(mode):
    out, err, _secs = run_in_pty(CHILD, mode)
    assert "OK" in err, err
    assert b"\x1b" not in out, out  # no escape sequence reached the terminal
    # the check has teeth: a plain import on the same terminal writes its queries
    plain, err2, _ = run_in_pty(PLAIN)
    assert b"\x1b[c" in plain or b"\x1b_G" in plain or b"\x1b[16t" in plain, (plain, err2)
