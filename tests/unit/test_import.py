"""``import nblog`` stays light: a fresh interpreter, then a look at sys.modules."""

from __future__ import annotations

import json
import os
import subprocess
import sys

HEAVY = ["polars", "numpy", "textual", "typer", "rich", "torch", "PIL", "psutil", "pynvml", "pyarrow"]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def loaded_after(code: str, tmp_path) -> list[str]:
    script = code + f"\nimport json, sys\nprint(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NB_", "RANK", "SLURM_", "OMPI_"))}
    env["PYTHONPATH"] = REPO
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=120, check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_nblog_loads_none_of_the_heavy_packages(tmp_path):
    assert loaded_after("import nblog", tmp_path) == []


def test_logging_a_run_loads_none_of_the_heavy_packages(tmp_path):
    code = """
import nblog as nb
run = nb.init("p", run_name="light", system=False, root="runs", config={"lr": 0.1})
run.add_scalar({"loss": 1.0, "acc": 0.5}, step=0)
run.add_scalar("loss", float("nan"), step=1)
run.add_scalar("loss", "bad", step=2)
run.add_text("t", "hello", step=1)
with run.timer("data"):
    pass
run.flush()
run.finish()
"""
    assert loaded_after(code, tmp_path) == []

