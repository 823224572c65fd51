"""nblog.reader._runfiles.console: parsing stamped lines, reading from the end across blocks, a torn
last line, malformed lines, merging files by time, following appended lines."""

from __future__ import annotations

import json
import tracemalloc

import pytest

from nblog.format._filenames import parse_console_file_name
from nblog.reader._runfiles.console import ConsoleLogs, parse_line


def make_run(tmp_path, files: dict[str, bytes]):
    run = tmp_path / "p" / "r-00000001"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"id": "r-00000001", "project": "p"}))
    for name, data in files.items():
        (run / name).write_bytes(data)
    return run


def stamped(t: float, step, stream: str, text: bytes) -> bytes:
    return b"%.3f\t%s\t%s\t%s\n" % (t, b"-" if step is None else b"%d" % step, stream.encode(), text)


def test_names_and_lines():
    assert parse_console_file_name("console.r12.s3.log") == (12, 3)
    assert parse_console_file_name("events.r0.s0.log") is None
    line = parse_line(b"1700000000.125\t7\te\tboom\tafter a tab \xff", 2, 1)
    assert (line.rank, line.session, line.wall_time, line.step, line.stream) == (2, 1, 1700000000.125, 7, "stderr")
    assert line.text == "boom\tafter a tab \ufffd"
    assert parse_line(b"1.0\t-\to\t", 0, 0).step is None
    assert parse_line(b"1.0\t-\t!\tnb: 3 lines", 0, 0).stream == "nb"
    for bad in (b"", b"1.0\t-\to", b"x\t1\to\ty", b"1.0\t-1\to\ty", b"1.0\t1\tz\ty", b"nan\t1\to\ty"):
        assert parse_line(bad, 0, 0) is None, bad


def test_last_lines_across_blocks_skip_the_torn_tail_and_malformed_lines(tmp_path):
    body = b"".join(stamped(1000 + i / 1000, i, "o", b"line %d " % i + b"y" * (i % 300)) for i in range(5000))
    data = body[:1000] + b"garbage without tabs\n" + body[1000:] + b"1999.000\t5\to\tcut by a kill"
    run = make_run(tmp_path, {"console.r0.s0.log": data})
    logs = ConsoleLogs(run)
    last = list(logs.read(last=7))
    assert [x.step for x in last] == list(range(4993, 5000))
    assert last[-1].text.startswith("line 4999 ")
    logs = ConsoleLogs(run)
    everything = list(logs.read())
    assert [x.step for x in everything] == list(range(5000)) and logs.skipped == 1
    assert len(list(ConsoleLogs(run).read(last=100_000))) == 5000


def test_merged_by_time_grep_and_follow(tmp_path):
    run = make_run(tmp_path, {
        "console.r0.s0.log": stamped(10.0, 1, "o", b"a0") + stamped(12.0, 2, "o", b"c0"),
        "console.r1.s0.log": stamped(11.0, 1, "e", b"b1 error") + stamped(13.0, 2, "o", b"d1"),
    })
    logs = ConsoleLogs(run)
    assert [(x.rank, x.text) for x in logs.read()] == [(0, "a0"), (1, "b1 error"), (0, "c0"), (1, "d1")]
    assert [x.text for x in ConsoleLogs(run, grep="error|d1").read()] == ["b1 error", "d1"]
    assert [x.text for x in ConsoleLogs(run, ranks=[1]).read(last=1)] == ["d1"]
    assert [x.text for x in ConsoleLogs(run).read(last=2)] == ["c0", "d1"]
    assert logs.poll() == []
    with open(run / "console.r0.s0.log", "ab") as f:
        f.write(stamped(14.0, 3, "o", b"e0") + b"15.000\t3\to\tnot yet")
    (run / "console.r0.s1.log").write_bytes(stamped(13.5, 0, "o", b"resumed"))
    assert [(x.session, x.text) for x in logs.poll()] == [(1, "resumed"), (0, "e0")]
    with open(run / "console.r0.s0.log", "ab") as f:
        f.write(b" now\n")
    assert [x.text for x in logs.poll()] == ["not yet now"]
    slept = []
    batches = list(logs.follow(0.5, timeout=1.0, sleep=slept.append, clock=iter([0.0, 0.2, 0.7, 1.2]).__next__))
    assert batches == [] and slept == pytest.approx([0.5, 0.3])  # the last sleep ends at the timeout


@pytest.mark.parametrize("last", [None, 3])
def test_missing_run_and_empty_files(tmp_path, last):
    assert list(ConsoleLogs("nope-00000000", tmp_path).read(last=last)) == []
    run = make_run(tmp_path, {"console.r0.s0.log": b"", "console.r1.s0.log": b"no newline at all"})
    logs = ConsoleLogs(run)
    assert list(logs.read(last=last)) == [] and logs.files() == [(0, 0), (1, 0)]


def test_a_planted_endless_line_costs_bounded_memory_and_is_skipped(tmp_path):
    huge = b"z" * (16 << 20)  # no line nb writes is longer than 64 KiB and a stamp
    data = stamped(1.0, 1, "o", b"before") + huge + b"\n" + stamped(2.0, 2, "o", b"after")
    run = make_run(tmp_path, {"console.r0.s0.log": data})
    del data
    for last in (None, 5):
        logs = ConsoleLogs(run)
        tracemalloc.start()
        try:
            assert [x.text for x in logs.read(last=last)] == ["before", "after"]
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 4 << 20, peak  # a few blocks and the longest line kept, not the 16 MiB
        assert logs.skipped == 1
    logs = ConsoleLogs(run)
    list(logs.read())
    with open(run / "console.r0.s0.log", "ab") as f:
        f.write(stamped(3.0, 3, "o", b"later"))
    assert [x.text for x in logs.poll()] == ["later"]


MANY = """
import resource, sys
from nblog.reader._runfiles.console import ConsoleLogs
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
for last in (None, 2):
    got = list(ConsoleLogs(sys.argv[1]).read(last=last))
    print(len(got), got[0].rank, got[-1].rank)
"""


def test_thousands_of_ranks_merge_with_few_descriptors(tmp_path):
    import subprocess
    import sys

    files = {f"console.r{r}.s0.log": stamped(100.0 + r, 1, "o", b"rank %d" % r) * 2 for r in range(300)}
    run = make_run(tmp_path, files)
    proc = subprocess.run([sys.executable, "-c", MANY, str(run)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n") == ["600 0 299", "2 299 299", ""]
