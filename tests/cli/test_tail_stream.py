"""nb tail -n N for an N larger than the log streams it: memory bounded by a read window,
never by N (it was about 400 bytes an event: 2.5 GB for -n 100000000 of a 114 MiB log);
the events and their order are those of the whole log's tail; long texts are cut in the
human output only."""

from __future__ import annotations

import json
import subprocess
import sys

from cli_helpers import clean_env

_NB = "import sys; from nbcli.app import main; sys.argv[0] = 'nb'; main()"

_WRITE = """
import sys, nblog as nb
root, run_id, n, resume = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
run = nb.init("big", run_id=run_id, root=root, system=False, resume=resume or None)
start = int(sys.argv[5]) if len(sys.argv) > 5 else 0
for i in range(start, start + n):
    run.add_scalar("loss", float(i), step=i)
    if i % 997 == 0:
        run.add_text("note", f"at {i}", step=i)
run.finish()
"""

# Runs the command given as arguments with stdout into a file; prints the child's peak RSS (KiB).
_PEAK = """
import json, resource, subprocess, sys
with open(sys.argv[1], "wb") as out:
    p = subprocess.run(sys.argv[2:], stdout=out, stderr=subprocess.PIPE, text=True)
print(json.dumps({"rc": p.returncode, "err": p.stderr,
                  "peak_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


def _write(root, run_id: str, n: int, resume: str = "", start: int = 0) -> None:
    subprocess.run([sys.executable, "-c", _WRITE, str(root), run_id, str(n), resume, str(start)], env=clean_env(),
                   check=True, timeout=120)


def _tail_peak(root, tmp_path, run_id: str, *args: str) -> tuple[int, list[dict]]:
    out = tmp_path / f"{run_id}.out"
    cmd = [sys.executable, "-c", _NB, "tail", run_id, "--root", str(root), "--json", *args]
    p = subprocess.run([sys.executable, "-c", _PEAK, str(out), *cmd], env=clean_env(), capture_output=True,
                       text=True, check=True, timeout=300)
    res = json.loads(p.stdout)
    assert res["rc"] == 0, res["err"]
    with open(out) as f:
        return res["peak_kib"] * 1024, [json.loads(line) for line in f]


def test_tail_n_larger_than_the_log_holds_a_window_not_n_events(tmp_path):
    root = tmp_path / "runs"
    points = 600_000
    _write(root, "small-00000001", 10)
    _write(root, "big-00000001", points)
    base, small = _tail_peak(root, tmp_path, "small-00000001", "-n", "100000000")
    assert [e["step"] for e in small if e["kind"] == "scalar"] == list(range(10))
    peak, got = _tail_peak(root, tmp_path, "big-00000001", "-n", "100000000")
    assert [e["step"] for e in got if e["kind"] == "scalar"] == list(range(points))
    assert len(got) == points + len(range(0, points, 997))
    # ~400 bytes an event before (240 MB here); a read window and its records now
    assert peak - base < 64 << 20, f"nb tail -n 100000000 of {points} points: peak RSS {peak >> 20} MiB"


def test_stream_is_the_tail_of_every_event_across_sessions_and_hands_over_to_follow(tmp_path):
    from nblog.reader._views.tail import _STREAM_ABOVE, Follower

    root = tmp_path / "runs"
    _write(root, "two-00000001", 30_000)
    _write(root, "two-00000001", 30_000, "must", 30_000)  # a resume: session 1
    every = Follower("two-00000001", root).poll()
    assert {e.session for e in every} == {0, 1} and len(every) > 60_000
    for n in (_STREAM_ABOVE + 1, 45_000, 10**9):
        assert list(Follower("two-00000001", root).stream(last=n)) == every[-n:], n
    f = Follower("two-00000001", root)
    assert len(list(f.stream(last=10**9))) == len(every)
    assert f.poll() == []  # nothing printed twice
    _write(root, "two-00000001", 3, "must", 60_000)  # session 2, seen by the next poll
    assert [(e.session, e.kind, e.step) for e in f.poll()] == [(2, "scalar", s) for s in (60_000, 60_001, 60_002)]


_WRITE_TEXTS = """
import sys, nblog as nb
run = nb.init("t", run_id="texts-00000001", root=sys.argv[1], system=False)
run.add_text("huge", "y" * 10_000_000, step=1)
run.add_text("lines", "first line\\nsecond\\tline", step=2)
run.add_text("short", "z" * 500, step=3)
run.finish()
"""


def test_a_long_text_is_cut_in_the_human_output_and_whole_in_json(tmp_path):
    root = tmp_path / "runs"
    subprocess.run([sys.executable, "-c", _WRITE_TEXTS, str(root)], env=clean_env(), check=True, timeout=120)
    cmd = [sys.executable, "-c", _NB, "tail", "texts-00000001", "--root", str(root)]
    p = subprocess.run(cmd, env=clean_env(), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    huge, lines, short = p.stdout.splitlines()
    assert len(huge) < 700
    assert huge.endswith("\t" + "y" * 500 + "\u2026 (9999500 more characters; --json prints all)")
    assert lines.endswith("\tfirst line\\nsecond\\tline")  # one line, the newline shown escaped
    assert short.endswith("\t" + "z" * 500)  # at the limit: whole, no marker
    p = subprocess.run([*cmd, "--json"], env=clean_env(), capture_output=True, text=True, timeout=120)
    texts = [json.loads(line)["text"] for line in p.stdout.splitlines()]
    assert texts == ["y" * 10_000_000, "first line\nsecond\tline", "z" * 500]


def test_a_file_that_is_not_a_log_is_warned_about_once_when_streaming(tmp_path):
    root = tmp_path / "runs"
    _write(root, "warn-00000001", 20)
    (root / "big" / "warn-00000001" / "events.r0.s1.log").write_bytes(b"not a log at all" * 10)
    for n in ("5", "100000"):
        p = subprocess.run([sys.executable, "-c", _NB, "tail", "warn-00000001", "--root", str(root), "-n", n, "--json"],
                           env=clean_env(), capture_output=True, text=True, timeout=120)
        assert p.returncode == 3, p.stderr  # what the file held was left out (nbcli._damage)
        assert p.stderr.count("not an nb event log") == 1, (n, p.stderr)
        assert [json.loads(line)["step"] for line in p.stdout.splitlines()][-1] == 19
