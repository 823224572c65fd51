"""Issue 17's incident job under the private Slurm cluster, and ``nb watch --exec`` cancelling it.

``sbatch -N 1 -n 4`` runs ``srun`` tests/integration/_scripts/incident_ddp.py (gloo,
CPU): NaN at step 50, rank 2 slow in data loading from step 80, every rank stopped with
SIGSTOP at step 120: the job hangs. A real ``nb watch --json --exec HOOK`` follows the
run from outside the job; the hook gets each alert as JSON on stdin, keeps it, and once
every rank has stalled runs ``scancel`` on the job, as a user's hook would. The
job is cancelled (Slurm sends SIGCONT and SIGTERM to the stopped ranks: nb closes their
logs), each alert came once, within two polls of its data (tests/integration/_incident.py).
"""

from __future__ import annotations

import json
import shlex
import signal
import sys
import uuid
from pathlib import Path

import pytest
from launchkit import REPO, job_states, run, sbatch, wait_for

sys.path.insert(0, str(REPO / "tests" / "integration"))
from _incident import FAULTS, FLUSH_S, SCRIPT, Watch, check_alerts  # noqa: E402

import nblog as nb  # noqa: E402

pytestmark = pytest.mark.launchers

HOOK = '''import json, subprocess, sys
job, sink, ranks = sys.argv[1:4]
alert = json.loads(sys.stdin.read())
with open(sink, "a") as f:
    f.write(json.dumps(alert) + "\\n")
stalled = sum(json.loads(line)["rule"] == "stall" for line in open(sink))
if alert["rule"] == "stall" and stalled == int(ranks):  # every rank is stuck: the job hangs
    sys.exit(subprocess.run(["scancel", job]).returncode)
'''


def test_a_hung_job_is_cancelled_by_nb_watch_exec_scancel(env, tmp_path: Path, slurm) -> None:
    run_id = f"slurm-{uuid.uuid4().hex[:8]}"
    env = dict(env, NB_RUN_ID=run_id, NB_FLUSH_INTERVAL=FLUSH_S, NB_PROVENANCE="0", PYTHONPATH=str(REPO))
    root = Path(env["NB_DIR"])
    job_sh = tmp_path / "job.sh"
    job_sh.write_text("#!/bin/bash\n" + shlex.join(["srun", sys.executable, str(SCRIPT), "--root", str(root),
                                                    "--pids", str(tmp_path / "pids"), *FAULTS]) + "\n")
    log = tmp_path / "job.out"
    job_id = sbatch(["-N", "1", "-n", "4", "-o", log, job_sh], env, cwd=tmp_path)
    hook, sink = tmp_path / "hook.py", tmp_path / "alerts.jsonl"
    hook.write_text(HOOK)
    watch = Watch(run_id, root / "incident" / run_id, env,
                  "--exec", shlex.join([sys.executable, str(hook), job_id, str(sink), "4"]))
    try:
        states = wait_for(lambda: (s := job_states(job_id, env)) and s.get(job_id) in ("CANCELLED", "COMPLETED",
                                                                                   "FAILED", "TIMEOUT") and s,
                          180, f"job {job_id} to end", [log])
        assert states[job_id] == "CANCELLED", (states, log.read_text())
        # every rank got the cancel's SIGTERM (after a SIGCONT) and closed its log
        wait_for(lambda: all(lf.end is not None for r in range(4) for lf in nb.RunReader(watch.run_dir).files(r)),
                 60, "every rank's END record", [log])
        werr = watch.finish(signal.SIGINT)  # the run is "preempted": nb watch follows on
    finally:
        watch.kill()
        if job_states(job_id, env).get(job_id) not in ("CANCELLED", "COMPLETED", "FAILED"):
            run(["scancel", job_id], env, check=False)
    assert watch.proc.returncode == 130 and "Traceback" not in werr, werr
    assert "exit status" not in werr, werr  # scancel succeeded, and ran once
    check_alerts(watch)
    hooked = [json.loads(line) for line in sink.read_text().splitlines()]
    assert hooked == watch.alerts(), "the hook got each alert, as printed, once"
    reader = nb.RunReader(watch.run_dir)
    ends = [s["end"] for r in range(4) for s in reader.sessions(r)]
    assert all(e and e.get("reason") == "SIGTERM" for e in ends), ends
    assert reader.meta["status"] == "running"  # SIGTERM: nb expects a requeue (nb ls: preempted)
