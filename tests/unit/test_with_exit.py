"""Leaving ``with nb.init(...)`` by ``sys.exit``: status follows the exit code."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

SCRIPT = """
import sys
import nblog as nb
with nb.init("p", run_id="exit-00000001", root=sys.argv[1], system=False, provenance=False) as run:
    run.add_scalar("x", 1.0)
    sys.exit(int(sys.argv[2]))
"""


@pytest.mark.parametrize(("code", "status"), [(0, "finished"), (3, "failed")])
def test_sys_exit_in_a_with_block_sets_the_status_by_its_code(tmp_path, code, status):
    """sys.exit(0) is a clean end of the job: the run was marked failed."""
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path), str(code)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == code, proc.stderr
    with open(tmp_path / "p" / "exit-00000001" / "run.json") as f:
        assert json.load(f)["status"] == status
