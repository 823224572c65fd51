"""SIGTERM from a launcher while nb is already finishing the run.

When every rank of a torchrun job raises at the same step, the first worker to die makes
the agent send SIGTERM to the others, which are at that moment inside nb's excepthook
(``Run.finish``: stopping the system sampler, draining the writer). Seen for real in this
suite: rank 0's session 0 ended with no points and no END frame although steps 0-2 had
been logged. The same happens when a Slurm requeue or scancel lands during the final
``finish()`` or the atexit flush.

Cause (fixed in nblog/write/_lifecycle.py): ``Run.finish`` sets ``_finished`` before it flushes,
and the SIGTERM handler only flushed runs that were not ``_finished``; with the default
SIGTERM action it then re-raised the signal at once, killing the process in the middle of
the interrupted finish. The handler now closes the writer of a finishing run too. SPEC §5: buffered events are flushed on uncaught exceptions and on
SIGTERM.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

import nblog as nb

pytestmark = pytest.mark.launchers

SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    import nblog as nb

    run = nb.init("p", run_name="sig", system=False, flush_interval=60, root=sys.argv[1])
    for i in range(5):
        run.add_scalar("x", i, step=i)

    # Deterministic stand-in for the race: SIGTERM arrives while finish() runs.
    def sigterm_now():
        os.kill(os.getpid(), signal.SIGTERM)

    run._on_finish.insert(0, sigterm_now)
    raise RuntimeError("every rank crashed; the launcher stops the survivors with SIGTERM")
    """
)


def test_sigterm_during_finish_keeps_the_buffered_points(tmp_path):
    root = tmp_path / "runs"
    p = subprocess.run([sys.executable, "-c", SCRIPT, str(root)], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode in (1, -signal.SIGTERM, 128 + signal.SIGTERM), p.stderr
    (run_dir,) = (root / "p").iterdir()
    reader = nb.RunReader(run_dir)
    assert reader.scalars("x")["step"].to_list() == [0, 1, 2, 3, 4]
