"""``nb report`` of a run whose event log is damaged (issue 22): the command says which
rank, file, bytes and points it skipped and exits 3, and the page itself says so in a
real headless Chromium (a fresh profile, conftest's ``browser``): a report never looks
whole when it is not."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_report_browser import nb_report, open_page

from nblog.format import _format as F

pytestmark = [pytest.mark.timeout(300), pytest.mark.timing]
RUN = "dmg-00000002"


def _damaged_run(root: Path) -> Path:
    """A run of 300 steps (two scalars, written by nblog in a real process) and its only
    frame of points damaged by one flipped byte."""
    script = textwrap.dedent(f"""
        import nblog
        run = nblog.init("p", root={str(root)!r}, run_id={RUN!r}, system=False, provenance=False)
        for step in range(300):
            run.add_scalar({{"train/loss": 1.0 / (step + 1), "train/lr": 0.1}}, step=step)
        run.finish()
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=300)
    log = root / "p" / RUN / "events.r0.s0.log"
    data = bytearray(log.read_bytes())
    pos = F.FILE_HEADER.size
    while data[pos + 3] != F.FRAME_COLUMNS:  # to the frame of points
        pos += F.FRAME_HEADER_SIZE + F.FRAME_HEADER.unpack_from(data, pos)[2]
    data[pos + 100] ^= 0xFF
    log.write_bytes(bytes(data))
    return log


def test_the_report_of_a_damaged_run_says_what_it_lacks(browser, tmp_path):
    root = tmp_path / "runs"
    log = _damaged_run(root)
    out = tmp_path / "r.html"
    res = nb_report(root, out, RUN)
    assert res.returncode == 3, res.stderr
    assert f"rank 0 session 0: {log}" in res.stderr and "600 points left out" in res.stderr
    assert out.exists()
    open_page(browser, out)
    box = browser.execute_script("var b = document.querySelector('.damage'); return b ? b.innerText : null")
    assert box is not None, "the page does not show the damage"
    assert f"Damaged event logs of {RUN}: this page lacks what 1 damaged range held" in box
    assert "600" in box and "points" in box
