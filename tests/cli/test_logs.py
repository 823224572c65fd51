"""nb logs: the console files of a real 2-rank torchrun job, merged by time, one rank,
--grep, -n, escaping, errors; -f following a live process."""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from cli_helpers import clean_env

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("_console_ddp.py")
LOOPBACK = ["env", "NB_LOOPBACK=require", "bash", str(REPO / "scripts" / "loopback.sh")]


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> tuple[Path, str, str]:
    """(root, run id, what torchrun printed on stdout) of a 2-rank job with console=True."""
    tmp = tmp_path_factory.mktemp("logs")
    root = tmp / "runs"
    env = clean_env(OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    cmd = [*LOOPBACK, str(Path(sys.executable).with_name("torchrun")), "--nnodes", "1", "--nproc-per-node", "2",
           "--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:29517", "--rdzv-id", "logs-job",
           str(SCRIPT), str(root)]
    proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    folder = re.search(r"^run folder: (\S+)$", proc.stdout, re.M)
    assert folder, proc.stdout + proc.stderr
    return root, os.path.basename(folder.group(1)), proc.stdout


def lines(cli, job, *args) -> list[dict]:
    root, rid, _ = job
    result = cli("logs", rid, "--root", str(root), "--json", *args)
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_all_ranks_merged_by_time(cli, job):
    got = lines(cli, job, "--all-ranks")
    assert set(got[0]) == {"rank", "session", "wall_time", "step", "stream", "text"}
    times = [x["wall_time"] for x in got]
    assert times == sorted(times)
    outs = {(x["rank"], x["text"]) for x in got if x["stream"] == "stdout"}
    assert {(r, f"rank {r} step {s}") for r in (0, 1) for s in range(5)} <= outs
    errs = [x["text"] for x in got if x["stream"] == "stderr"]
    assert errs == [f"rank 1 warning at step {s}" for s in range(5)]
    for x in got:
        m = re.match(r"rank (\d) (?:step|warning at step) (\d)$", x["text"])
        if m:  # flushed at that step before printing: stamped with it (or a later one)
            assert int(m.group(1)) == x["rank"] and int(m.group(2)) <= x["step"] <= 4


def test_the_terminal_still_got_every_rank(job):
    _root, _rid, out = job
    for r in (0, 1):
        for s in range(5):
            assert f"rank {r} step {s}\n" in out


def test_one_rank(cli, job):
    assert {x["rank"] for x in lines(cli, job)} == {0}  # rank 0 by default
    one = lines(cli, job, "--rank", "1")
    assert {x["rank"] for x in one} == {1}
    assert [x["text"] for x in one if x["stream"] == "stdout"] == [f"rank 1 step {s}" for s in range(5)]


def test_grep_and_last_n(cli, job):
    warnings = lines(cli, job, "-a", "--grep", r"warning at step [0-9]")
    assert [x["text"] for x in warnings] == [f"rank 1 warning at step {s}" for s in range(5)]
    everything = lines(cli, job, "-a")
    assert lines(cli, job, "-a", "-n", "3") == everything[-3:]
    assert lines(cli, job, "-a", "-n", "0") == []
    assert lines(cli, job, "-a", "-n", "2", "--grep", "warning") == warnings[-2:]
    assert lines(cli, job, "-a", "-n", "1000") == everything


def test_plain_lines_have_a_rank_prefix_and_no_raw_escape(cli, job):
    root, rid, _ = job
    result = cli("logs", rid, "--root", str(root), "-a")
    assert result.exit_code == 0, result.stderr
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    assert all(len(row) == 5 for row in rows)
    assert {row[1] for row in rows} == {"r0", "r1"}
    assert ["r1", "4", "err", "rank 1 warning at step 4"] in [row[1:] for row in rows]
    assert "\x1b" not in result.stdout
    assert "colour \\x1b[31mred\\x1b[0m end [bold red]x[/] \\u202eevil" in result.stdout


def test_terminal_output_prints_logged_text_inert(cli, job):
    root, rid, _ = job
    result = cli("logs", rid, "--root", str(root), "-a", env={"FORCE_COLOR": "1", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.stderr
    assert "colour \\x1b[31mred\\x1b[0m end [bold red]x[/] \\u202eevil" in result.stdout
    for raw in ("\x1b[31m", "\u202e"):
        assert raw not in result.stdout
    assert "r1" in result.stdout and "rank 1 warning at step 4" in result.stdout


def test_errors(cli, job, tmp_path):
    root, rid, _ = job
    both = cli("logs", rid, "--root", str(root), "--rank", "1", "--all-ranks")
    assert both.exit_code == 2 and "exclude each other" in both.stderr
    bad = cli("logs", rid, "--root", str(root), "--grep", "(")
    assert bad.exit_code == 2 and "not a regular expression" in bad.stderr
    missing = cli("logs", rid, "--root", str(root), "--rank", "5")
    assert missing.exit_code == 1
    assert "rank 5 has no console log" in missing.stderr and "ranks with one: 0-1" in missing.stderr
    nothing = cli("logs", "nope-00000000", "--root", str(root))
    assert nothing.exit_code == 1 and "Traceback" not in nothing.stderr
    plain = tmp_path / "runs" / "p" / "plain-00000001"  # a run without console capture
    plain.mkdir(parents=True)
    (plain / "run.json").write_text(json.dumps({"id": "plain-00000001", "project": "p"}))
    none = cli("logs", str(plain))
    assert none.exit_code == 1 and "no console log" in none.stderr and "console=True" in none.stderr


ECHO = """
import sys
import nblog as nb
run = nb.init("follow", run_id="fol-00000001", root=sys.argv[1], console=True, system=False,
              flush_interval=0.05)
for i, line in enumerate(sys.stdin):
    run.add_scalar("x", float(i), step=i)
    run.flush()
    print(line.rstrip("\\n"), flush=True)
"""


def _reader(proc: subprocess.Popen, q: queue.Queue) -> None:
    for line in proc.stdout:
        q.put(line)
    q.put(None)


def _next(q: queue.Queue) -> dict:
    line = q.get(timeout=60)
    assert line is not None, "nb logs -f ended"
    return json.loads(line)


def test_follow_picks_up_new_lines(tmp_path):
    root = tmp_path / "runs"
    child = subprocess.Popen([sys.executable, "-c", ECHO, str(root)], env=clean_env(PYTHONPATH=str(REPO)),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    follow = subprocess.Popen(
        [sys.executable, "-c", "from nbcli.app import main; main()", "logs", "fol-00000001", "-f", "--json",
         "--interval", "0.05", "--timeout", "120", "--root", str(root)],
        env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    q: queue.Queue = queue.Queue()
    threading.Thread(target=_reader, args=(follow, q), daemon=True).start()
    try:
        for i, text in enumerate(["first line", "second \x1b[2J line", "third"]):
            child.stdin.write(text + "\n")
            child.stdin.flush()
            assert child.stdout.readline() == text + "\n"  # the echo, at once
            got = _next(q)
            assert (got["text"], got["step"], got["stream"], got["rank"]) == (text, i, "stdout", 0)
        child.stdin.close()
        assert child.wait(timeout=60) == 0
    finally:
        child.kill()
        child.wait(timeout=30)
        child.stdout.close()
        child.stderr.close()
        follow.terminate()
        follow.communicate(timeout=30)
    assert q.get(timeout=30) is None  # nothing printed twice
