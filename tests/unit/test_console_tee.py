"""nblog.write._console_tee, the console helper's file side: lines dropped from a file that
lags are counted in a note; a write the kernel cuts short is cut back to whole lines."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

from nblog.write._console_tee import FileSink


def test_lines_dropped_while_the_file_lags_are_counted_in_a_note(tmp_path):
    path = tmp_path / "console.r0.s0.log"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND)
    try:
        sink = FileSink(fd, interval=600.0, backlog=10)  # the file thread sleeps: the file "lags"
        sink.put(b"1.000\t-\to\tfirst\n", 1)
        sink.put(b"1.001\t-\to\tsecond\n1.001\t-\to\tthird\n", 2)  # more than 10 bytes behind: dropped
        sink.close()
    finally:
        os.close(fd)
    lines = path.read_bytes().split(b"\n")
    assert lines[0] == b"1.000\t-\to\tfirst" and lines[-1] == b""
    note = re.match(rb"^\d+\.\d{3}\t-\t!\tnb: 2 lines \(\d+ bytes\) of console output are missing here: "
                    rb"the file fell behind the output$", lines[1])
    assert note, lines[1]
    assert len(lines) == 3


CUT = """
import os, resource, signal, sys
from nblog.write._console_tee import FileSink
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND)
sink = FileSink(fd, interval=600.0)
line = b"1.000\\t7\\to\\t" + b"y" * 52 + b"\\n"  # 63 bytes
for i in range(40):
    sink.put(line * 3, 3)  # 189 bytes
    sink._drain()  # as the file thread does, one batch at a time
sink.close()
"""


def test_a_write_cut_short_by_the_kernel_leaves_only_whole_lines(tmp_path):
    path = tmp_path / "console.r0.s0.log"
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(CUT), str(path)], capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    data = path.read_bytes()
    # 5 batches fit under 1000 bytes; the 6th was cut by the kernel at 1000 and cut back
    assert len(data) == 5 * 189
    assert data == (b"1.000\t7\to\t" + b"y" * 52 + b"\n") * 15
