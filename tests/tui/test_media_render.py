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

from nbcli.tui.widgets.histogram import (
    HistogramData,
    bar_chart,
    bins_per_bar,
    heat_rows,
    heat_strip,
    resample,
)
from nbcli.tui.widgets.picture import fit_cells, pick_mode


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
    assert share.shape == (4, 30) and list(starts) == [0, 2, 5, 7]
    assert np.allclose(share.sum(axis=1), 1.0)  # each row: the shares of its steps' values
    assert grid[0] == 0 and grid[-1] == 100
    text = heat_strip(data, 40, 5).plain.split("\n")
    assert len(text) == 5
    assert text[3].startswith("▶ 70")  # the row of the selected step (index 7, step 70)
    # the oldest row is shaded on the left, the newest on the right
    assert text[0][5:10].strip() and not text[0][-10:].strip()
    assert text[3][-5:].strip()


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
