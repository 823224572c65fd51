"""The short variant of ``scripts/soak.py`` (the full one is 1,000,000 steps): 50,000
steps of 20 tags, a timer per step and system metrics every 50 ms; the writer's RSS
stays flat, no descriptor leaks, the reader's results are exact."""

from __future__ import annotations

import subprocess
import sys

from hardkit import FULL, REPO, clean_env


def test_soak_short(tmp_path):
    steps = "1000000" if FULL else "50000"
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "soak.py"), "--steps", steps, "--root",
                        str(tmp_path / "runs")], capture_output=True, text=True, env=clean_env(), timeout=1800)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.rstrip().endswith("OK") and "read back exactly" in p.stdout, p.stdout
