"""``import nblog`` stays light: a fresh interpreter, then a look at sys.modules."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

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



HIDE = """
import sys
HIDDEN = {hidden!r}

class Hide:  # as if these packages were not installed
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, Hide())
try:
    {statement}
except ImportError as err:
    print(type(err).__name__, "|", err)
else:
    print("IMPORTED")
"""



@pytest.mark.parametrize(
    ("statement", "hidden", "extra"),
    [
        ("from nblog.integrations.lightning import NbLogger", ["lightning", "pytorch_lightning"], "lightning"),
        ("from nblog.integrations.transformers import NbCallback", ["transformers"], "transformers"),
        ("from nblog.integrations.accelerate import NbTracker", ["accelerate"], "accelerate"),
        ("from nblog.tensorboard import export_tfevents; export_tfevents('x', 'out')", ["tensorboard"],
         "tensorboard"),
    ],
)
def test_a_framework_door_without_its_extra_names_the_pip_install(tmp_path, statement, hidden, extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NB_", "RANK", "SLURM_", "OMPI_"))}
    env["PYTHONPATH"] = REPO
    out = subprocess.run([sys.executable, "-c", HIDE.format(hidden=hidden, statement=statement)], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    line = out.stdout.strip().splitlines()[-1]
    assert line.startswith("ImportError |") and f'pip install "nblog[{extra}]"' in line, line
