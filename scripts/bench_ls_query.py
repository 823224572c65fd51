"""How long ``nb ls`` takes on a root of many runs, plain and with --where/--sort/--columns/--group.

    .venv/bin/python scripts/bench_ls_query.py [--runs 5000] [--root DIR] [--repeat 5]

Writes the root first (unless DIR already holds runs) with real nblog: sweep driver
processes (tests/cli/_sweep_writer.py) calling init/add_scalar/finish once per run,
with nested random configs. Then times each command in a fresh interpreter (best of
``--repeat``), twice: as written (no ``summary`` in run.json: tag queries read the
event logs of the runs the rest of the query leaves), and after adding to each
run.json the ``summary`` object the writer keeps (nb-format(5)), as runs of a nblog
that writes it will have.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SWEEP = HERE.parent / "tests" / "cli" / "_sweep_writer.py"
NB = [sys.executable, "-c", "from nbcli.app import main; main()"]
QUERIES = [
    [],
    ["--json"],
    ["--where", "optim.lr < 3e-4 and model.layers >= 2"],
    ["--where", "optim.lr < 3e-4 and optim.name = 'adam'", "--sort", "model.width", "--desc",
     "-c", "optim.lr,model.width,status"],
    ["--group", "optim.lr", "-c", "model.layers,status", "--json"],
    ["--where", "optim.lr < 3e-4 and optim.name = 'adam' and seed < 500 and train/loss.min < 0.2"],
    ["--where", "train/loss.min < 0.05", "--sort", "train/loss.min"],
]


def _env(root: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "LOCAL_", "WORLD_", "NB_", "SLURM_",
                                                                     "TORCHELASTIC_", "OMPI_", "PMI_"))}
    env["NB_DIR"] = str(root)
    return env


def write_root(root: Path, n: int, procs: int = 4) -> float:
    """``n`` runs under ``root/sweep`` with nested configs; returns the seconds taken."""
    rnd = random.Random(0)
    runs = []
    for i in range(n):
        config = {"optim": {"lr": rnd.choice([1e-4, 3e-4, 1e-3, 3e-3]), "name": rnd.choice(["adam", "sgd"]),
                            "sched": {"warmup": rnd.randint(0, 5) * 100, "decay": {"kind": "cos", "min": 0.1}}},
                  "model": {"layers": rnd.randint(1, 8), "width": rnd.choice([64, 128, 256]),
                            "act": rnd.choice(["gelu", "relu"])},
                  "data": {"path": f"/data/set{i % 10}", "batch": rnd.choice([32, 64])}, "seed": i}
        runs.append({"id": f"b{i:05d}", "config": config,
                     "loss": [round(rnd.uniform(0.01, 2), 5) for _ in range(5)], "acc": [rnd.random()]})
    t0 = time.perf_counter()
    ps = []
    for p in range(procs):
        spec = root.parent / f"{root.name}.spec{p}.json"
        spec.write_text(json.dumps({"project": "sweep", "runs": runs[p::procs]}))
        ps.append(subprocess.Popen([sys.executable, str(SWEEP), f"@{spec}"], env=_env(root)))
    for p in ps:
        if p.wait() != 0:
            raise SystemExit("a sweep writer failed")
    return time.perf_counter() - t0


def add_summaries(root: Path) -> None:
    """Put the writer's summary (nb-format(5)) into each run.json, from the event logs."""
    sys.path.insert(0, str(HERE.parent))
    from nblog.reader._views.tag_stats import tag_stats

    for run in (root / "sweep").iterdir():
        path = run / "run.json"
        meta = json.loads(path.read_text())
        summary = tag_stats(str(run), {})
        meta["summary"] = {t: {k: (v if not isinstance(v, float) or math.isfinite(v) else str(v))
                               for k, v in st.items()} for t, st in summary.items()}
        path.write_text(json.dumps(meta))


def best(args: list[str], root: Path, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = subprocess.run(NB + ["ls", "--root", str(root), *args], env=_env(root), capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        if out.returncode != 0:
            raise SystemExit(f"nb ls {args} failed: {out.stderr}")
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5000)
    ap.add_argument("--root", type=Path)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    tmp = None
    root = a.root
    if root is None:
        tmp = tempfile.mkdtemp(prefix="nb-bench-ls-")
        root = Path(tmp) / "runs"
    if not (root / "sweep").is_dir():
        print(f"writing {a.runs} runs with real nblog: {write_root(root, a.runs):.1f} s", flush=True)
    try:
        rows = {}
        for q in QUERIES:
            rows[" ".join(q) or "(plain)"] = [best(q, root, a.repeat)]
        add_summaries(root)
        for q in QUERIES:
            rows[" ".join(q) or "(plain)"].append(best(q, root, a.repeat))
        print(f"nb ls on {len(list((root / 'sweep').iterdir()))} runs, best of {a.repeat} (s):")
        print(f"{'no summary':>11} {'summary':>8}  arguments")
        for k, (no, yes) in rows.items():
            print(f"{no:11.3f} {yes:8.3f}  {k}")
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
