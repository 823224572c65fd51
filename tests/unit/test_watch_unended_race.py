"""nb watch's ``unended`` rule on a busy machine: a rank that writes its END record and
exits between the watcher's read of its log and its look at the rank's pid is a rank that
ended, not one that died (a false alarm in CI beside stress-ng)."""

from __future__ import annotations

import os
import subprocess
import sys

from nblog.reader import Watcher
from nblog.reader._views import watch as watch_module
from nblog.reader.lowlevel import LogFile, read_on

_RANK = """
import sys
import nblog as nb
run = nb.init("race", run_id="race-00000001", root=sys.argv[1], system=False)
for step in range(20):
    run.add_scalar("loss", 1.0, step=step)
run.finish()
"""


def test_an_end_written_just_before_the_process_exits_is_no_unended_alert(tmp_path, monkeypatch):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "WORLD_SIZE", "LOCAL_", "NB_"))}
    subprocess.run([sys.executable, "-c", _RANK, str(tmp_path)], check=True, env=env, timeout=120)
    run_dir = tmp_path / "race" / "race-00000001"
    log = run_dir / "events.r0.s0.log"
    whole = log.read_bytes()
    # the log as the watcher's read saw it: the longest prefix a reader parses whole without END
    lo = len(whole) - 1
    while lo > 0:
        log.write_bytes(whole[:lo])
        probe = LogFile(str(log), keep=False)
        for _d in read_on(probe):
            pass
        if probe.end is None and probe.offset == lo:
            break
        lo -= 1
    assert 0 < lo < len(whole)
    watcher = Watcher(str(run_dir))
    real_gone = watcher._gone

    def gone_after_end_written(header, last):  # the rank writes END and exits right here
        log.write_bytes(whole)
        return real_gone(header, last)

    monkeypatch.setattr(watcher, "_gone", gone_after_end_written)
    alerts = watcher.poll()
    assert [a["rule"] for a in alerts if a["rule"] == "unended"] == [], alerts
    assert watch_module._ends_now(str(log))
