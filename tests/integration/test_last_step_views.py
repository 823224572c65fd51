"""One last step in every view, and one rule for a live writer (issue 22 item 5 and the
``nb show`` "running" after ``kill -9``), with real processes and a real ``kill -9``.

- A run killed with ``kill -9`` while run.json lags its event log (progress updates every
  hour here, as after the last of them when a real run dies): ``nb ls`` (also a second
  time, from its cache, without reading a log again), ``nb show`` (its Run, Sessions and
  Event logs sections), ``nb report``, ``nb diff`` and ``LiveRun`` (the TUI's reader) give
  the last step the log holds; and both commands call the run stale at once, since its process on this machine
  is gone (it was "running" for three minutes).
- The same after a torchrun job whose rank 0 was killed (``kill -9``) at step 30.
- ``add_hparams`` after steps 0-49 logs its metrics at step 0: the event log's last step
  is still 49 (it was the step of the last record, 0).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _nbproc import REPO, base_env, read_line, start_code, wait

import nblog as nb
from nblog.reader import LiveRun
from nblog.reader._runs.listing_cache import MIN_RUNS

NB = [sys.executable, "-c", "from nbcli.app import main; main()"]

# nb ls, reporting on stderr which event logs and run.json files it opened
_LS = r"""
import atexit, json, os, sys
opened = []

def hook(event, args):
    if event == "open" and args and isinstance(args[0], str) and os.path.basename(args[0]).startswith("events."):
        opened.append(args[0])

sys.addaudithook(hook)
atexit.register(lambda: sys.stderr.write("OPENED " + json.dumps(opened) + "\n"))
from nbcli.app import main
sys.argv = ["nb", "ls", "--root", sys.argv[1], "--json"]
main()
"""


def nb_cli(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([*NB, *args], capture_output=True, text=True, env=base_env(**env), timeout=120)


def ls(root: Path, cache: Path) -> tuple[dict, list[str]]:
    """``nb ls --json`` rows by id, and the event logs it opened."""
    out = subprocess.run([sys.executable, "-c", _LS, str(root)], env=base_env(NB_CACHE_DIR=str(cache)),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return {r["id"]: r for r in json.loads(out.stdout)}, json.loads(out.stderr.rsplit("OPENED ", 1)[1])


def logged_last_step(run_dir: Path) -> int:
    """What rank 0's event log holds: the highest step of its scalars and timers."""
    r = nb.RunReader(str(run_dir))
    return max(int(r.scalars()["step"].max()), int(r.timers()["step"].max()))


def test_after_kill_9_every_view_gives_the_last_step_of_the_logs_and_says_stale(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    body = textwrap.dedent("""
        import time
        import nblog as nb
        run = nb.init("crash", run_id="k9-views", system=False, provenance=False)
        for step in range(688):
            with run.timer("time/step", step=step):
                pass
            run.add_scalar({"loss": 1.0 / (step + 1), "lr": 0.1}, step=step)
            if step == 0:
                run.flush()  # run.json records the first step, and its last step as 0
        run.flush()  # a real barrier: steps 0-687 are in the event log
        print("LOGGED", flush=True)
        time.sleep(600)
    """)
    # run.json's progress every hour: it keeps the first step's figure, as a run killed
    # between two progress updates keeps an older one
    proc = start_code(body, base_env(NB_DIR=str(root), NB_PROGRESS_S="3600"), tmp_path)
    assert read_line(proc) == "LOGGED", wait(proc, expect_rc=None)
    run_dir = root / "crash" / "k9-views"
    proc.send_signal(signal.SIGKILL)
    assert wait(proc, expect_rc=None).rc == -signal.SIGKILL
    recorded = json.loads((run_dir / "run.json").read_text())["sessions"][0]["last_step"]
    truth = logged_last_step(run_dir)
    assert truth == 687 and recorded < truth, (recorded, truth)

    info = json.loads(nb_cli("show", str(run_dir), "--json").stdout)
    assert info["run"]["last_step"] == truth
    assert info["run"]["status"] == "stale", "its process on this machine is gone: not running"
    assert [s["last_step"] for s in info["sessions"]] == [truth]
    assert [f["last_step"] for f in info["files"]] == [truth]
    text = nb_cli("show", str(run_dir)).stdout
    assert f"last step\t{truth}\n" in text and "status\tstale\n" in text, text

    page = tmp_path / "report.html"
    assert nb_cli("report", str(run_dir), "-o", str(page)).returncode == 0
    data = json.loads(re.search(r'<script type="application/json" id="nb-data">(.*?)</script>',
                                page.read_text(), re.S).group(1))
    (run,) = data["runs"]
    assert (run["last_step"], run["status"], [s["last_step"] for s in run["sessions"]]) == (truth, "stale", [truth])

    live = LiveRun(str(run_dir))
    live.tags(0)  # loads rank 0, as the run screen does
    assert live.last_step(0) == truth

    # a root large enough for the listing cache; the copies keep their files' times
    for i in range(MIN_RUNS):
        shutil.copytree(run_dir, root / "crash" / f"k9-copy{i:04d}")
    for d in (root / "crash").iterdir():
        for p in [*d.iterdir(), d]:  # an hour back, each file keeping its own order
            st = os.stat(p)
            os.utime(p, (st.st_atime - 3600, st.st_mtime - 3600))
    diff = json.loads(nb_cli("diff", str(run_dir), str(root / "crash" / "k9-copy0000"), "--json").stdout)
    assert [f["values"] for f in diff["sessions"]["fields"] if f["field"] == "last_step"] == [[truth, truth]]

    cache = tmp_path / "cache"
    rows, opened = ls(root, cache)
    assert len(rows) == MIN_RUNS + 1
    assert {(r["last_step"], r["status"]) for r in rows.values()} == {(truth, "stale")}
    assert opened, "the logs newer than run.json were read"
    again, opened = ls(root, cache)
    assert again == rows and opened == [], "the second listing takes what it read from its cache"


@pytest.mark.slow
def test_after_a_torchrun_job_lost_rank_0_to_kill_9_ls_and_show_give_the_logs_last_step(tmp_path: Path) -> None:
    """torchrun, 4 gloo ranks: rank 0 flushes and kills itself (SIGKILL) at step 30, the
    job ends; run.json's last step is its figure of step 1 (progress updates every hour
    here, as a job dying between two of them leaves an older one), the event log holds
    step 30."""
    import uuid

    from test_failures import LOOPBACK, SCRIPT, TIMEOUT_S, _env

    cmd = [*LOOPBACK, sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "4",
           "--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:29518", "--rdzv-id", f"k9-{uuid.uuid4().hex[:8]}",
           str(SCRIPT), "--root", str(tmp_path / "runs"), "--kill-rank", "0", "--at", "30", "--flush-first"]
    proc = subprocess.run(cmd, cwd=tmp_path, env={**_env(), "NB_PROGRESS_S": "3600"}, capture_output=True,
                          text=True, timeout=TIMEOUT_S)
    m = re.search(r"^run id: (\S+)$", proc.stdout, re.M)
    assert m and proc.returncode != 0, f"exit {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    run_dir = tmp_path / "runs" / "fail" / m.group(1)
    truth = logged_last_step(run_dir)
    assert truth == 30
    recorded = json.loads((run_dir / "run.json").read_text())["sessions"][0]["last_step"]
    assert recorded is None or recorded < truth, recorded  # what the views must not stop at
    info = json.loads(nb_cli("show", str(run_dir), "--json").stdout)
    (row,) = json.loads(nb_cli("ls", "--root", str(tmp_path / "runs"), "--json").stdout)
    assert (info["run"]["last_step"], row["last_step"]) == (truth, truth)
    # other ranks may fail after it (gloo: "Connection closed by peer"): failed, else stale
    assert info["run"]["status"] == row["status"] in ("failed", "stale"), "rank 0's process is gone"


HPARAMS = """
import sys
from nblog.tensorboard import SummaryWriter
w = SummaryWriter(root=sys.argv[1], project="hp", run_id="hp-00000001", system=False, provenance=False)
for step in range(50):
    w.add_scalar("loss", 1.0 / (step + 1), step)
w.add_text("notes", "done", 0)
w.add_hparams({"lr": 0.1}, {"hparam/loss": 0.02})  # at step 0, after step 49
w.close()
print(w.run.dir)
"""


def test_add_hparams_at_step_0_after_step_49_leaves_49_in_every_view(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-c", HPARAMS, str(tmp_path)], env=base_env(), cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    run_dir = out.stdout.strip()
    info = json.loads(nb_cli("show", run_dir, "--json").stdout)
    assert [f["last_step"] for f in info["files"]] == [49], info["files"]
    assert [s["last_step"] for s in info["sessions"]] == [49]
    assert info["run"]["last_step"] == 49
    (row,) = json.loads(nb_cli("ls", "--root", str(tmp_path), "--json").stdout)
    assert row["last_step"] == 49
    table = nb_cli("show", run_dir).stdout
    logs = table[table.index("# Event logs"):]
    assert "\t0\t49\t" in logs, logs  # FIRST STEP 0, LAST STEP 49
