"""Issue 22 item 6 under the real torchrun: the one straggler rule names the straggler
and only it, in ``nb timers``, ``nb watch``, ``nb report`` and the TUI.

``torchrun --nproc-per-node 4`` (gloo, CPU, in a loopback-only network namespace:
scripts/loopback.sh) runs tests/integration/_scripts/straggler_ddp.py. Its timer durations
come from a model (exact at any load; on ranks that really wait, real time counts in
whole seconds), so the healthy jitter is the same on an idle or a loaded machine; the
straggler really sleeps 2 s a step, a margin no load crosses. Three jobs:

- healthy: rank 0's first step takes 8 ms (warm-up), rank 2 has one 4 ms spike, the
  rest 41-49 µs: no view names anyone (the mean rule named rank 0);
- slow: rank 1 sleeps 2 s every step, rank 2 has one 4 ms spike on the third step; the
  ranks pause after 3 steps: ``nb timers`` and ``nb watch`` name rank 1, and only it,
  from those 3 steps (a ``nb watch`` following the run says so before the job goes
  on); after the job the report and the TUI name rank 1 only;
- a rank dies: rank 3 stops for 2 s at step 5 and raises (or SIGKILLs itself) while
  ranks 0 and 1 wait for its output inside their timed work: no rank is named, and
  the rule says from which step it left the session out.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tests" / "integration" / "_scripts" / "straggler_ddp.py"
LOOPBACK = ["env", "NB_LOOPBACK=require", "bash", str(REPO / "scripts" / "loopback.sh")]
NB = [sys.executable, "-c", "from nbcli.app import main; main()"]
HANG_S = 240
TAG = "time/work"

pytestmark = [pytest.mark.slow, pytest.mark.timing]


def _env(root: Path, run_id: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NB_", "SLURM_", "OMPI_", "PMI", "TORCHELASTIC_"))
           and k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(REPO), NB_PROVENANCE="0", NB_DIR=str(root), NB_RUN_ID=run_id,
               NB_FLUSH_INTERVAL="0.1", NO_COLOR="1")
    return env


class Job:
    """``torchrun --nproc-per-node 4 straggler_ddp.py ARGS`` under ``tmp_path``."""

    def __init__(self, tmp_path: Path, name: str, *args: str, monitor_s: float = 0.1):
        self.root = tmp_path / "runs"
        self.flags = tmp_path / f"flags-{name}"
        self.flags.mkdir()
        self.run_id = f"{name}-{uuid.uuid4().hex[:8]}"
        self.dir = self.root / "straggler" / self.run_id
        self.env = _env(self.root, self.run_id)
        cmd = [*LOOPBACK, sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "4",
               "--monitor-interval", str(monitor_s), str(SCRIPT), "--root", str(self.root), "--name", name,
               "--flags", str(self.flags), *args]
        self.proc = subprocess.Popen(cmd, cwd=tmp_path, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, start_new_session=True)

    def wait(self, ok: bool = True) -> None:
        try:
            out, err = self.proc.communicate(timeout=HANG_S)
        except subprocess.TimeoutExpired:
            self.kill()
            out, err = self.proc.communicate()
            raise AssertionError(f"the job hung:\n{out[-3000:]}\n{err[-3000:]}") from None
        assert (self.proc.returncode == 0) == ok, f"exit {self.proc.returncode}:\n{out[-3000:]}\n{err[-3000:]}"

    def wait_paused(self) -> None:
        deadline = time.monotonic() + HANG_S
        while len(list(self.flags.glob("paused.r*"))) < 4:
            if self.proc.poll() is not None:
                out, err = self.proc.communicate()
                raise AssertionError(f"the job ended (exit {self.proc.returncode}) before pausing:\n{err[-3000:]}")
            assert time.monotonic() < deadline, "the ranks did not pause"
            time.sleep(0.05)  # waiting for the job, not timing it

    def go(self) -> None:
        (self.flags / "go").write_text("")

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()

    def nb(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        p = subprocess.run([*NB, *args], env=self.env, capture_output=True, text=True, timeout=HANG_S)
        if check:
            assert p.returncode == 0, (args, p.stdout, p.stderr)
        return p


@pytest.fixture
def job(tmp_path):
    jobs: list[Job] = []

    def start(name: str, *args: str, **kw) -> Job:
        jobs.append(Job(tmp_path, name, *args, **kw))
        return jobs[-1]

    yield start
    for j in jobs:
        j.kill()


# -- what each view names ------------------------------------------------------------


def timers_json(job: Job) -> dict:
    return json.loads(job.nb("timers", job.run_id, "--json").stdout)


def named_by_timers(job: Job) -> list[int]:
    rep = timers_json(job)
    (t,) = rep["timers"]
    flagged = [r["rank"] for r in rep["ranks"] if r["straggler"]]
    assert t["stragglers"] == len(flagged) and t["straggler"] == bool(flagged)
    return flagged


def named_by_timers_table(job: Job) -> list[int]:
    """The ranks whose STRAGGLER cell says yes in the plain per-rank table."""
    lines = job.nb("timers", job.run_id, "--all-ranks").stdout.splitlines()
    head = lines.index("TIMER\tRANK\tCOUNT\tMEAN\tP50\tP95\tMAX\tTOTAL\tMEDIAN/STEP\tSTRAGGLER")
    rows = [ln.split("\t") for ln in lines[head + 1:head + 5]]
    assert [r[1] for r in rows] == ["0", "1", "2", "3"], rows
    return [int(r[1]) for r in rows if r[-1] == "yes"]


def straggler_alerts(job: Job) -> list[dict]:
    p = job.nb("watch", job.run_id, "--once", "--json", check=False)
    assert p.returncode in (0, 1), p.stderr
    alerts = [json.loads(line) for line in p.stdout.splitlines()]
    assert (p.returncode == 1) == bool(alerts)
    return [a for a in alerts if a["rule"] == "straggler"]


def named_by_report(job: Job, tmp: Path) -> dict:
    page = tmp / f"{job.run_id}.html"
    job.nb("report", job.run_id, "-o", str(page))
    data = json.loads(re.search(r'id="nb-data">(.*?)</script>', page.read_text(), re.S).group(1))
    (run,) = data["runs"]
    (heat,) = run["timers"]
    assert heat["tag"] == TAG and heat["ranks"] == [0, 1, 2, 3]
    return heat


def named_by_tui(job: Job) -> tuple[list[int], list[str]]:
    """(ranks marked in the TUI's timers table, labels of the band's lines), from the
    real app driven by Textual's Pilot."""
    import asyncio

    from textual.widgets import DataTable

    from nbcli.tui.app import NbTui
    from nbcli.tui.widgets.plot import BraillePlot

    async def go():
        app = NbTui(runs=[str(job.dir)], poll_s=0)
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(2):
                await pilot.pause()
                await app.workers.wait_for_complete()
            await pilot.press("2")
            for _ in range(3):
                await pilot.pause()
                await app.workers.wait_for_complete()
                await pilot.pause()
            table = app.screen.query_one("#timer-table", DataTable)
            cells = [table.get_row_at(i) for i in range(table.row_count)]
            assert [str(c[1]).strip(" ◀") for c in cells] == ["0", "1", "2", "3"], cells
            marked = [int(str(c[1]).strip(" ◀")) for c in cells if "◀" in str(c[1])]
            band = app.screen.query_one("#band", BraillePlot).spec
            return marked, [ln.label for ln in band.lines]

    return asyncio.run(go())


# -- the jobs ------------------------------------------------------------------------


def test_a_healthy_job_with_warm_up_jitter_names_no_one(job, tmp_path):
    j = job("healthy", "--steps", "12", "--warm-rank", "0", "--spike-rank", "2", "--spike-at", "6")
    j.wait()
    rep = timers_json(j)
    by_rank = {r["rank"]: r for r in rep["ranks"]}
    assert by_rank[0]["max_s"] == pytest.approx(8e-3) and by_rank[2]["max_s"] == pytest.approx(4e-3)
    assert all(41e-6 <= r["step_s"] <= 49e-6 and r["steps"] == 11 for r in rep["ranks"]), rep["ranks"]
    assert named_by_timers(j) == [] and named_by_timers_table(j) == []
    assert straggler_alerts(j) == []
    heat = named_by_report(j, tmp_path)
    assert heat["stragglers"] == []
    marked, _lines = named_by_tui(j)
    assert marked == []


def test_a_slow_rank_is_named_after_three_steps_and_only_it(job, tmp_path):
    j = job("slow", "--steps", "4", "--warm-rank", "0", "--slow-rank", "1", "--spike-rank", "2", "--spike-at", "2",
            "--pause-after", "3")
    # a watch following the run from before it starts, as an operator would run it
    # (stalls are not the subject: the job waits for this test as long as the test takes)
    watch = subprocess.Popen([*NB, "watch", j.run_id, "--json", "--interval", "0.5", "--timeout", str(HANG_S),
                              "--stall-floor", "3600"],
                             env=j.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: list[dict] = []
    reader = threading.Thread(target=lambda: seen.extend(json.loads(line) for line in watch.stdout), daemon=True)
    reader.start()
    try:
        j.wait_paused()
        # 3 steps of data on every rank, the job waiting: both commands name rank 1, only it
        rep = timers_json(j)
        assert {r["rank"]: r["count"] for r in rep["ranks"]} == {0: 3, 1: 3, 2: 3, 3: 3}
        assert named_by_timers(j) == [1] and named_by_timers_table(j) == [1]
        (alert,) = straggler_alerts(j)
        assert (alert["rank"], alert["tag"], alert["steps"]) == (1, TAG, 2) and alert["step_s"] >= 2.0
        deadline = time.monotonic() + HANG_S
        while not any(a["rule"] == "straggler" for a in seen):
            assert watch.poll() is None and time.monotonic() < deadline, (watch.poll(), seen)
            time.sleep(0.05)  # waiting for the watch's poll, not timing it
        j.go()
        j.wait()
        assert watch.wait(timeout=HANG_S) == 1, watch.stderr.read()  # it reported an alert: status 1
    finally:
        j.go()
        if watch.poll() is None:
            watch.kill()
    reader.join(timeout=30)
    assert [(a["rule"], a["rank"]) for a in seen] == [("straggler", 1)], seen
    assert named_by_timers(j) == [1]
    heat = named_by_report(j, tmp_path)
    assert heat["stragglers"] == [1] and heat["slowest_rank"] == 1
    marked, lines = named_by_tui(j)
    assert marked == [1] and "slowest rank 1" in lines, lines


@pytest.mark.parametrize("how", ["raise", "kill"])
def test_ranks_waiting_on_a_rank_that_died_are_not_named(job, tmp_path, how):
    # the agent looks at its workers every 30 s: the ranks record their failures before
    # it tears the job down
    j = job(f"die-{how}", "--steps", "8", "--warm-rank", "0", "--die-rank", "3", "--die-at", "5", "--die-how", how,
            "--waiters", "0,1", monitor_s=30)
    j.wait(ok=False)
    rep = timers_json(j)
    by_rank = {r["rank"]: r for r in rep["ranks"]}
    assert by_rank[0]["max_s"] >= 2.0 and by_rank[1]["max_s"] >= 2.0  # they timed the wait at step 5
    assert rep["cut"] == [{"session": 0, "step": 5, "rank": 3}]  # the rank the others waited for
    assert all(r["steps"] == 4 for r in rep["ranks"]), rep["ranks"]  # steps 1-4
    assert named_by_timers(j) == [] and named_by_timers_table(j) == []
    assert "steps 5 and later left out of the straggler rule" in j.nb("timers", j.run_id).stderr
    assert straggler_alerts(j) == []
    assert named_by_report(j, tmp_path)["stragglers"] == []
    marked, _lines = named_by_tui(j)
    assert marked == []
