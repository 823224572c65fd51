"""The step of a failure is the step the rank was in (issue 22 item 4): the highest step
it logged by any call, not the step of its last ``add_scalar``.

A real torchrun job (4 gloo ranks, tests/integration/_scripts/fail_ddp.py, in a
loopback-only network namespace): every rank times each step (``timing_all_ranks``),
and rank 2 raises at step 30 after its timer of step 30 and before its ``add_scalar``
of step 30. Every view (``RunReader``, ``nb show``, ``nb ls``, ``nb watch --once``,
``nb report``) names step 30; ranks that fail after it (gloo's "Connection closed by
peer" inside the timer of their next step) are named at the highest step they logged.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_failures import nb_cli, torchrun

import nblog as nb


@pytest.mark.slow
def test_a_rank_raising_after_its_timers_of_step_30_failed_at_step_30_in_every_view(tmp_path: Path) -> None:
    proc, run_dir = torchrun(tmp_path, "--raise-rank", "2", "--at", "30", "--raise-before-scalar")
    assert proc.returncode != 0, "torchrun reports the failed rank"
    message = "CUDA out of memory (injected at step 30, before its scalar)"

    r = nb.RunReader(run_dir)
    failures = r.failures()
    first = failures.row(0, named=True)
    assert (first["rank"], first["session"], first["step"], first["message"]) == (2, 0, 30, message)
    timed = r.timers(all_ranks=True)
    # rank 2 timed step 30, logged no scalar at 30: the failure is at 30, not at its last scalar's 29
    assert int(timed.filter(timed["rank"] == 2)["step"].max()) == 30
    for f in failures.iter_rows(named=True):  # every rank that failed: at the highest step it logged
        mine = timed.filter(timed["rank"] == f["rank"])["step"].max()
        assert f["step"] == mine, (f["rank"], f["step"], mine, f["message"])

    line = f"failed: rank 2 ({first['host']}), step 30, RuntimeError: {message}"
    info = json.loads(nb_cli("show", str(run_dir), "--json").stdout)
    assert (info["first_failure"]["rank"], info["first_failure"]["step"]) == (2, 30)
    assert info["failure_line"].startswith(line), info["failure_line"]
    show = nb_cli("show", str(run_dir))
    assert show.returncode == 0 and line in show.stdout, show.stdout

    root = str(run_dir.parent.parent)
    (row,) = json.loads(nb_cli("ls", "--root", root, "--json").stdout)
    assert row["status"] == "failed" and (row["failure"]["rank"], row["failure"]["step"]) == (2, 30), row
    assert row["failure_line"].startswith(line), row["failure_line"]

    watch = nb_cli("watch", str(run_dir), "--once", "--json")
    alerts = [json.loads(x) for x in watch.stdout.splitlines()]
    failed = [(a["rank"], a["step"]) for a in alerts if a["rule"] == "failure"]
    assert failed[0] == (2, 30), alerts
    assert sorted(failed) == sorted((f["rank"], f["step"]) for f in failures.iter_rows(named=True)), (failed, failures)

    page = tmp_path / "report.html"
    report = nb_cli("report", str(run_dir), "-o", str(page))
    assert report.returncode == 0, report.stderr
    assert re.search(re.escape(f"step 30, RuntimeError: {message}"), page.read_text()), "the report names step 30"
