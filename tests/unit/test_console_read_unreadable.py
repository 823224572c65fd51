"""A console file that cannot be opened is left out of ``read(last=N)``, with a warning.

Found by the type checker: ``_File.backward`` answered an unreadable file with
``iter(())``, which has no ``close()``, so ``ConsoleLogs.read(last=N)`` (``nb logs``, the
TUI's console view) raised AttributeError instead of reading the other files.
"""

from __future__ import annotations

import json
import logging
import os

import pytest

from nblog.reader._runfiles.console import ConsoleLogs


def _line(t: float, text: bytes) -> bytes:
    return b"%.3f\t-\to\t%s\n" % (t, text)


@pytest.mark.parametrize("last", [1, 5])
def test_a_fifo_named_like_a_console_file_is_left_out(tmp_path, caplog, last):
    run = tmp_path / "p" / "r-00000001"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"id": "r-00000001", "project": "p"}))
    (run / "console.r0.s0.log").write_bytes(_line(100.0, b"rank zero"))
    os.mkfifo(run / "console.r1.s0.log")  # opened non-blocking and refused: not a regular file
    with caplog.at_level(logging.WARNING, logger="nblog"):
        lines = list(ConsoleLogs(run).read(last=last))
    assert [(ln.rank, ln.text) for ln in lines] == [(0, "rank zero")]
    assert any("console.r1.s0.log" in r.getMessage() for r in caplog.records)
