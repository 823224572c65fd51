"""The doors cost nothing until used: ``import nblog`` loads none of them nor their frameworks."""

from __future__ import annotations

import json
import subprocess
import sys

from fwkit import clean_env

LAZY = ["nblog.integrations", "nblog.tensorboard", "lightning", "pytorch_lightning", "transformers",
        "accelerate", "torch", "tensorboard", "numpy", "matplotlib"]


def loaded_after(code: str, tmp_path) -> list[str]:
    script = code + f"\nimport json, sys\nprint(json.dumps(sorted(m for m in {LAZY!r} if m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=clean_env(),
                         capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_nblog_loads_no_door(tmp_path):
    assert loaded_after("import nblog", tmp_path) == []


def test_summary_writer_scalars_load_nothing_heavy(tmp_path):
    code = """
from nblog.tensorboard import SummaryWriter
with SummaryWriter("logs/x", root="runs", system=False) as w:
    w.add_scalar("loss", 1.0, 0)
    w.add_scalars("lr", {"a": 1.0}, 0)
    w.add_text("t", "x", 0)
"""
    assert loaded_after(code, tmp_path) == ["nblog.tensorboard"]
