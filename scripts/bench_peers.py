"""nb side by side with the trackers people would use instead, in one run (issue 18, item 1).

The same workload goes through nb and each installed peer: torch.utils.tensorboard's
SummaryWriter, tensorboardX, wandb (offline), MLflow (a local SQLite store), Aim and trackio.
Each tool runs in its own fresh interpreter, tools interleaved (nb, peer, nb, peer, ...), and
the script prints a Markdown table of medians with min-max over the repeats and the ratio
peer / nb (above 1: nb is cheaper). Peers that do not import are skipped and named.

The peers pull in large dependency trees (the ``bench`` extra); keep them out of the
development venv::

    python3 -m venv /tmp/venv-peers
    /tmp/venv-peers/bin/pip install torch==2.13.0     # first: the CPU wheel, so nothing pulls CUDA
    /tmp/venv-peers/bin/pip install -c <(echo torch==2.13.0) ".[bench]"
    /tmp/venv-peers/bin/python scripts/bench_peers.py                  # the full run, ~30 min
    /tmp/venv-peers/bin/python scripts/bench_peers.py --points 20000 --read-points 100000 \
        --cap-s 4 --only nb,tensorboard,trackio                        # a couple of minutes

The children import nblog from this checkout (PYTHONPATH; ``--nb-path`` names another tree),
whatever the venv has installed.

Offline and local: every child gets HOME, XDG_*, HF_HOME, TRACKIO_DIR, WANDB_DIR and the
MLflow store inside one temporary folder, WANDB_MODE=offline, WANDB_SILENT, telemetry off
(MLFLOW_DISABLE_TELEMETRY, DO_NOT_TRACK, HF_HUB_DISABLE_TELEMETRY, HF_HUB_OFFLINE, Aim has no
SDK telemetry), and HTTP(S)_PROXY / ALL_PROXY pointing at 127.0.0.1:9 (a closed port), so a
network call a tool still tries fails at once instead of hanging; NO_PROXY keeps loopback for a
tool's own helper process (wandb-core). Every child also has a wall-clock timeout.

What each figure is:
- training thread: µs per call of the tool's usual call, one tag, and a dict of 10 tags
  (nb ``add_scalar(dict)``; SummaryWriter and tensorboardX loop ``add_scalar`` over the dict;
  ``wandb.log``, ``mlflow.log_metrics``, ``aim.Run.track(dict)``, ``trackio.log``). Each
  loop stops after ``--points`` points or ``--cap-s`` seconds, whichever comes first (MLflow
  takes milliseconds a call); "calls" says how many were timed. Each tool runs with its
  defaults (system metrics as each samples them by default).
- incl. finish/close: the same loop plus the tool's finish()/close()/end_run(), per call.
- init: opening the first run in an empty store (MLflow's includes creating its database).
- peak RSS: the higher of the worker's own ru_maxrss and the peak of its process tree's
  summed proportional set sizes (helpers such as wandb-core included, sampled every 0.2 s by
  this script), minus the worker's RSS once it has imported torch, as a training script has.
- bytes per point: growth of the tool's whole store folder from open to close, per point;
  once for the one-tag loop above and once for the read set below.
- non-logging rank: what each tool's docs say to do on rank != 0. nb: the inert run a
  non-zero rank gets from nb.init; the peers: an ``if rank == 0:`` guard around the call
  (the same code for every peer; it never reaches the tool). wandb's ``mode="disabled"`` and
  nb's ``mode="disabled"`` are a row of their own. "dict built at the call site" writes the
  10-key dict literal in the call, as training code does.
- import: ``import <tool>`` in a fresh interpreter that has already imported torch.
- read: seconds to read ``--read-points`` points (10 tags) back into a frame with each tool's
  usual reader, imports excluded: nb ``RunReader.scalars()`` (Polars); TensorBoard's
  ``EventAccumulator`` on SummaryWriter's files (into a Polars frame); tbparse's
  ``SummaryReader`` on tensorboardX's files (pandas); ``MlflowClient.get_metric_history``
  per tag (pandas); Aim's ``Run.metrics()`` ``.dataframe()`` (pandas); trackio's
  ``SQLiteStorage.get_logs`` (pandas; trackio's public ``Api`` has no metric reader, this is
  what its dashboard reads). wandb offline has no local reader (runs are read after
  ``wandb sync``, from the server). The read set is written once per tool, with system
  metrics off, through the tool's own API (MLflow's ``log_batch``, 1,000 metrics a call),
  not timed; Aim's run is then added to the repo's index, as ``aim up`` does, without which
  its SDK does not see the run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = ("nb", "tensorboard", "tensorboardX", "wandb", "mlflow", "aim", "trackio")
MODULE = {
    "nb": "nblog",
    "tensorboard": "torch.utils.tensorboard",
    "tensorboardX": "tensorboardX",
    "wandb": "wandb",
    "mlflow": "mlflow",
    "aim": "aim",
    "trackio": "trackio",
}
# the modules a tool's reader needs (checked before a read is attempted)
READER_MODULE = {
    "nb": "polars",
    "tensorboard": "tensorboard.backend.event_processing.event_accumulator",
    "tensorboardX": "tbparse",
    "mlflow": "mlflow",
    "aim": "aim",
    "trackio": "trackio",
}
DEAD_PROXY = "http://127.0.0.1:9"
TAGS = tuple(f"train/metric{k}" for k in range(10))
CHUNK = 500  # calls between two looks at the time cap


# ----------------------------------------------------------------------------- workers
# Each worker runs in a fresh interpreter: `bench_peers.py --worker KIND --tool T ...`,
# and writes its figures as JSON to --out.

def _tree_bytes(path: str) -> int:
    """Total size in bytes of the regular files under ``path`` (0 if it does not exist)."""
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


def _make_loop(call: str, names: dict):
    """A function ``loop(start, count)`` doing ``call`` for steps start..start+count-1.

    Every tool's loop is the same generated code with its own call expression, the tool's
    bound method a closure variable, so no tool pays for an indirection the others skip.
    """
    params = ", ".join(names)
    src = textwrap.dedent(f"""
        def make({params}):
            def loop(start, count):
                for i in range(start, start + count):
                    {call}
            return loop
    """)
    scope: dict = {}
    exec(src, scope)  # noqa: S102 - our own template, no outside input
    return scope["make"](**names)


def _timed(loop, points_per_call: int, points: int, cap_s: float) -> tuple[int, float]:
    """Run ``loop`` until ``points`` points or ``cap_s`` seconds; return (calls, seconds)."""
    calls_max = max(points // points_per_call, 1)
    done = 0
    t0 = time.perf_counter()
    while done < calls_max:
        k = min(CHUNK, calls_max - done)
        loop(done, k)
        done += k
        if time.perf_counter() - t0 > cap_s:
            break
    return done, time.perf_counter() - t0


def _ns_per_call(loop, calls: int, batches: int = 5) -> float:
    """Median over ``batches`` batches of the ns per call of ``loop``."""
    per = max(calls // batches, 1)
    out = []
    for b in range(batches):
        t0 = time.perf_counter_ns()
        loop(b * per, per)
        out.append((time.perf_counter_ns() - t0) / per)
    return statistics.median(out)


DICT_LITERAL = "{" + ", ".join(f'"{t}": i * 0.001' for t in TAGS) + "}"


class Tool:
    """One tracker's usual calls. ``open`` returns a handle; the call strings use names that
    ``names(handle)`` binds."""

    scalar_call = ""
    dict_call = ""
    guarded_call = ""  # what a non-logging rank runs (a guard around the usual call)
    guarded_dict_call = ""
    disabled_call = ""  # a call on the tool's own disabled mode, where it has one

    def __init__(self, store: str):
        self.store = store

    def open(self, name: str, system: bool = True):
        raise NotImplementedError

    def names(self, h) -> dict:
        raise NotImplementedError

    def close(self, h) -> None:
        raise NotImplementedError

    def store_dir(self, name: str) -> str:
        return os.path.join(self.store, name)

    def write_read_set(self, steps: int) -> None:
        """Write ``steps`` steps of the 10 tags (system metrics off), through the tool's API."""
        h = self.open("readset", system=False)
        self._write_set(h, self.names(h), steps)
        self.close(h)

    def _write_set(self, h, fn: dict, steps: int) -> None:
        raise NotImplementedError

    def read(self, steps: int) -> int:
        """Read the read set into a frame; return the number of points in it."""
        raise NotImplementedError


class NbTool(Tool):
    scalar_call = 'add("train/loss", i * 0.001, step=i)'
    dict_call = "add(tags, step=i)"
    guarded_call = scalar_call  # the inert run's bound no-op
    guarded_dict_call = f"add({DICT_LITERAL}, step=i)"
    disabled_call = 'fn("train/loss", i * 0.001, step=i)'

    def open(self, name, system=True):
        import nblog

        run = nblog.init("bench", run_name=name, root=self.store_dir(name), system=system)
        return run

    def names(self, h):
        return {"add": h.add_scalar}

    def close(self, h):
        h.finish()

    def nonlogging(self, rank0):
        """The inert run a non-zero rank of rank0's job gets from nb.init."""
        import nblog

        env = dict(os.environ, RANK="1", WORLD_SIZE="2", LOCAL_RANK="1", LOCAL_WORLD_SIZE="2")
        return nblog.init("bench", run_id=rank0.id, resume="auto", root=os.path.dirname(os.path.dirname(rank0.dir)),
                          _environ=env)

    def disabled(self):
        import nblog

        return nblog.init("bench", mode="disabled", root=self.store_dir("disabled"))

    def _write_set(self, h, fn, steps):
        add = fn["add"]
        for i in range(steps):
            add({t: i * 0.001 + k for k, t in enumerate(TAGS)}, step=i)

    def read(self, steps):
        import nblog

        root = self.store_dir("readset")
        (project,) = os.listdir(root)
        (run_id,) = os.listdir(os.path.join(root, project))
        df = nblog.RunReader(os.path.join(root, project, run_id)).scalars()
        return len(df)


class TensorBoardTool(Tool):
    scalar_call = 'add("train/loss", i * 0.001, i)'
    dict_call = "for key, v in items(): add(key, v, i)"
    guarded_call = f"if rank == 0: {scalar_call}"
    guarded_dict_call = f"if rank == 0: log({DICT_LITERAL}, i)"
    module = "torch.utils.tensorboard"

    def open(self, name, system=True):
        if self.module == "tensorboardX":
            from tensorboardX import SummaryWriter
        else:
            from torch.utils.tensorboard import SummaryWriter
        return SummaryWriter(self.store_dir(name))

    def names(self, h):
        return {"add": h.add_scalar, "log": None}

    def close(self, h):
        h.close()

    def _write_set(self, h, fn, steps):
        add = fn["add"]
        for i in range(steps):
            for k, t in enumerate(TAGS):
                add(t, i * 0.001 + k, i)

    def read(self, steps):
        import polars as pl
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

        acc = EventAccumulator(self.store_dir("readset"), size_guidance={"scalars": 0})
        acc.Reload()
        tag_col, step_col, value_col, wall_col = [], [], [], []
        for tag in acc.Tags()["scalars"]:
            events = acc.Scalars(tag)
            tag_col.extend([tag] * len(events))
            step_col.extend(e.step for e in events)
            value_col.extend(e.value for e in events)
            wall_col.extend(e.wall_time for e in events)
        df = pl.DataFrame({"tag": tag_col, "step": step_col, "value": value_col, "wall_time": wall_col})
        return len(df)


class TensorBoardXTool(TensorBoardTool):
    module = "tensorboardX"

    def read(self, steps):
        from tbparse import SummaryReader

        df = SummaryReader(self.store_dir("readset")).scalars
        return len(df)


class WandbTool(Tool):
    scalar_call = 'log({"train/loss": i * 0.001}, step=i)'
    dict_call = "log(tags, step=i)"
    guarded_call = f"if rank == 0: {scalar_call}"
    guarded_dict_call = f"if rank == 0: log({DICT_LITERAL}, step=i)"
    disabled_call = 'fn({"train/loss": i * 0.001}, step=i)'

    def open(self, name, system=True):
        import wandb

        os.makedirs(self.store_dir(name), exist_ok=True)
        return wandb.init(project="bench", name=name, dir=self.store_dir(name), mode="offline")

    def names(self, h):
        return {"log": h.log}

    def close(self, h):
        h.finish()

    def disabled(self):
        import wandb

        return wandb.init(project="bench", mode="disabled")


class MlflowTool(Tool):
    scalar_call = 'log("train/loss", i * 0.001, step=i)'
    dict_call = "log_metrics(tags, step=i)"
    guarded_call = f"if rank == 0: {scalar_call}"
    guarded_dict_call = f"if rank == 0: log_metrics({DICT_LITERAL}, step=i)"

    def store_dir(self, name):
        # one SQLite store per worker, as one tracking server keeps every run
        return self.store

    def uri(self, name):
        return "sqlite:///" + os.path.join(self.store_dir(name), "mlflow.db")

    def open(self, name, system=True):
        import mlflow

        os.makedirs(self.store_dir(name), exist_ok=True)
        mlflow.set_tracking_uri(self.uri(name))
        mlflow.set_experiment("bench")
        return mlflow.start_run(run_name=name)

    def names(self, h):
        import mlflow

        return {"log": mlflow.log_metric, "log_metrics": mlflow.log_metrics}

    def close(self, h):
        import mlflow

        mlflow.end_run()

    def _write_set(self, h, fn, steps):
        from mlflow.entities import Metric
        from mlflow.tracking import MlflowClient

        client = MlflowClient(self.uri("readset"))
        run_id = h.info.run_id
        batch = []
        now = int(time.time() * 1000)
        for i in range(steps):
            for k, t in enumerate(TAGS):
                batch.append(Metric(t, i * 0.001 + k, now, i))
            if len(batch) >= 1000:
                client.log_batch(run_id, metrics=batch)
                batch = []
        if batch:
            client.log_batch(run_id, metrics=batch)
        with open(os.path.join(self.store_dir("readset"), "run_id"), "w") as f:
            f.write(run_id)

    def read(self, steps):
        import pandas as pd
        from mlflow.tracking import MlflowClient

        with open(os.path.join(self.store_dir("readset"), "run_id")) as f:
            run_id = f.read()
        client = MlflowClient(self.uri("readset"))
        rows = []
        for t in TAGS:
            rows.extend((m.key, m.step, m.value, m.timestamp) for m in client.get_metric_history(run_id, t))
        df = pd.DataFrame(rows, columns=["tag", "step", "value", "timestamp"])
        return len(df)


class AimTool(Tool):
    scalar_call = 'track(i * 0.001, name="train/loss", step=i)'
    dict_call = "track(tags, step=i)"
    guarded_call = f"if rank == 0: {scalar_call}"
    guarded_dict_call = f"if rank == 0: track({DICT_LITERAL}, step=i)"

    def open(self, name, system=True):
        import aim

        kw = {} if system else {"system_tracking_interval": None}
        return aim.Run(repo=self.store_dir(name), experiment="bench", **kw)

    def names(self, h):
        return {"track": h.track}

    def close(self, h):
        h.close()

    def write_read_set(self, steps):
        import aim
        from aim.sdk.index_manager import RepoIndexManager

        h = self.open("readset", system=False)
        track = h.track
        for i in range(steps):
            track({t: i * 0.001 + k for k, t in enumerate(TAGS)}, step=i)
        run_hash = h.hash
        self.close(h)
        # a closed run is readable once the repo's index has it: `aim up` indexes in the
        # background, here it is done at once (not timed, like the rest of the writing)
        RepoIndexManager.get_index_manager(aim.Repo.from_path(self.store_dir("readset"))).index(run_hash)
        with open(os.path.join(self.store_dir("readset"), "run_hash"), "w") as f:
            f.write(run_hash)

    def read(self, steps):
        import aim
        import pandas as pd

        with open(os.path.join(self.store_dir("readset"), "run_hash")) as f:
            run_hash = f.read()
        run = aim.Run(run_hash, repo=self.store_dir("readset"), read_only=True)
        df = pd.concat([m.dataframe(include_name=True) for m in run.metrics()])
        return len(df)


class TrackioTool(Tool):
    scalar_call = 'log({"train/loss": i * 0.001}, step=i)'
    dict_call = "log(tags, step=i)"
    guarded_call = f"if rank == 0: {scalar_call}"
    guarded_dict_call = f"if rank == 0: log({DICT_LITERAL}, step=i)"

    def store_dir(self, name):
        # trackio keeps every project under TRACKIO_DIR, read once at import
        return os.environ["TRACKIO_DIR"]

    def open(self, name, system=True):
        import trackio

        kw = {} if system else {"auto_log_cpu": False, "auto_log_gpu": False}
        return trackio.init(project=f"bench-{name}", name=name, **kw)

    def names(self, h):
        import trackio

        return {"log": trackio.log}

    def close(self, h):
        import trackio

        trackio.finish()

    def _write_set(self, h, fn, steps):
        log = fn["log"]
        for i in range(steps):
            log({t: i * 0.001 + k for k, t in enumerate(TAGS)}, step=i)

    def read(self, steps):
        import pandas as pd
        from trackio.sqlite_storage import SQLiteStorage

        df = pd.DataFrame(SQLiteStorage.get_logs("bench-readset", "readset"))
        return int(sum(df[t].notna().sum() for t in TAGS if t in df.columns))


TOOL_CLASS = {
    "nb": NbTool,
    "tensorboard": TensorBoardTool,
    "tensorboardX": TensorBoardXTool,
    "wandb": WandbTool,
    "mlflow": MlflowTool,
    "aim": AimTool,
    "trackio": TrackioTool,
}


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def worker_write(tool_name: str, store: str, points: int, cap_s: float, nonlog_calls: int) -> dict:
    """The training-thread figures of one tool, in this (fresh) interpreter."""
    import resource

    import torch  # noqa: F401 - a training script has imported it before any tracker

    res: dict = {"baseline_rss_mib": _rss_bytes() / 2**20}
    tool = TOOL_CLASS[tool_name](store)
    __import__(MODULE[tool_name])
    tags = {t: 0.1 * k for k, t in enumerate(TAGS)}

    def names(h):
        return {**tool.names(h), "tags": tags, "items": tags.items, "rank": 1}

    # one tag per call
    t0 = time.perf_counter()
    h = tool.open("scalar")
    res["init_s"] = time.perf_counter() - t0
    size0 = _tree_bytes(tool.store_dir("scalar"))
    calls, loop_s = _timed(_make_loop(tool.scalar_call, names(h)), 1, points, cap_s)
    t0 = time.perf_counter()
    tool.close(h)
    close_s = time.perf_counter() - t0
    res["calls_scalar"] = calls
    res["scalar_us"] = loop_s / calls * 1e6
    res["scalar_close_us"] = (loop_s + close_s) / calls * 1e6
    res["close_ms"] = close_s * 1000
    res["bytes_scalar"] = (_tree_bytes(tool.store_dir("scalar")) - size0) / calls
    # a dict of 10 tags per call
    h = tool.open("dict")
    calls, loop_s = _timed(_make_loop(tool.dict_call, names(h)), 10, points, cap_s)
    t0 = time.perf_counter()
    tool.close(h)
    close_s = time.perf_counter() - t0
    res["calls_dict"] = calls
    res["dict_us"] = loop_s / calls * 1e6
    res["dict_close_us"] = (loop_s + close_s) / calls * 1e6
    # a non-logging rank
    if isinstance(tool, NbTool):
        rank0 = tool.open("nonlogging")
        rank1 = tool.nonlogging(rank0)
        h_names = {"add": rank1.add_scalar}
    else:
        rank0 = rank1 = None
        h_names = {"add": None, "log": None, "log_metrics": None, "track": None}
    h_names.update({"tags": tags, "items": tags.items, "rank": 1})
    res["nonlog_scalar_ns"] = _ns_per_call(_make_loop(tool.guarded_call, h_names), nonlog_calls)
    res["nonlog_dict_ns"] = _ns_per_call(_make_loop(tool.guarded_dict_call, h_names), nonlog_calls)
    if rank1 is not None:
        rank1.finish()
        rank0.finish()
    if isinstance(tool, (NbTool, WandbTool)):
        d = tool.disabled()
        fn = d.add_scalar if tool_name == "nb" else d.log
        res["disabled_ns"] = _ns_per_call(_make_loop(tool.disabled_call, {"fn": fn}), nonlog_calls)
        d.finish()
    # this process only: RUSAGE_CHILDREN would count a forked child (nb's provenance runs
    # git) at its parent's size; helper processes are sampled by the driver instead
    res["ru_maxrss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return res


def worker_prep(tool_name: str, store: str, read_points: int) -> dict:
    """Write the read set once (not timed) and measure the store's growth per point."""
    tool = TOOL_CLASS[tool_name](store)
    steps = read_points // len(TAGS)
    size0 = _tree_bytes(tool.store_dir("readset"))
    t0 = time.perf_counter()
    tool.write_read_set(steps)
    return {"prep_s": time.perf_counter() - t0,
            "bytes_readset": (_tree_bytes(tool.store_dir("readset")) - size0) / (steps * len(TAGS))}


def worker_read(tool_name: str, store: str, read_points: int) -> dict:
    """Seconds to read the read set back into a frame (imports done before the clock)."""
    tool = TOOL_CLASS[tool_name](store)
    # the tool and its frame library are imported before the clock starts (import time is a
    # figure of its own); what a reader imports lazily on its first call is counted
    __import__(MODULE[tool_name])
    __import__(READER_MODULE[tool_name])
    __import__("polars" if tool_name in ("nb", "tensorboard") else "pandas")
    t0 = time.perf_counter()
    got = tool.read(read_points // len(TAGS))
    read_s = time.perf_counter() - t0
    steps = read_points // len(TAGS)
    if got != steps * len(TAGS):
        raise SystemExit(f"{tool_name} read {got} points, wrote {steps * len(TAGS)}")
    return {"read_s": read_s}


# ----------------------------------------------------------------------------- driver

def child_env(tmp: str, nb_path: str) -> dict:
    """The environment of every child: offline, local, its homes inside ``tmp``; nblog is
    imported from ``nb_path``."""
    home = os.path.join(tmp, "home")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WANDB_", "MLFLOW_", "AIM_", "NB_", "TRACKIO_"))}
    env.update({
        "PYTHONPATH": nb_path + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""),
        "HOME": home,
        "XDG_CONFIG_HOME": os.path.join(home, ".config"),
        "XDG_CACHE_HOME": os.path.join(home, ".cache"),
        "XDG_DATA_HOME": os.path.join(home, ".local", "share"),
        "XDG_STATE_HOME": os.path.join(home, ".local", "state"),
        "HF_HOME": os.path.join(home, "hf"),
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "TRACKIO_DIR": os.path.join(tmp, "stores", "trackio"),
        "WANDB_MODE": "offline",
        "WANDB_SILENT": "true",
        "WANDB_DIR": os.path.join(tmp, "wandb-dir"),
        "WANDB_CACHE_DIR": os.path.join(home, ".cache", "wandb"),
        "WANDB_CONFIG_DIR": os.path.join(home, ".config", "wandb"),
        "WANDB_DATA_DIR": os.path.join(home, ".local", "share", "wandb"),
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "DO_NOT_TRACK": "true",
        "MPLCONFIGDIR": os.path.join(home, ".config", "matplotlib"),
        "GIT_CONFIG_NOSYSTEM": "1",
    })
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        env[var] = DEAD_PROXY
    env["NO_PROXY"] = env["no_proxy"] = "localhost,127.0.0.1,::1"
    for d in (home, env["WANDB_DIR"], env["TRACKIO_DIR"], env["HF_HOME"]):
        os.makedirs(d, exist_ok=True)
    return env


class Driver:
    def __init__(self, args, tmp: str):
        self.args = args
        self.tmp = tmp
        self.env = child_env(tmp, os.path.abspath(args.nb_path))
        # children start in an empty folder: `python -c "import wandb"` in a folder holding a
        # folder named wandb imports that folder (a namespace package) when wandb is missing
        self.cwd = os.path.join(tmp, "cwd")
        os.makedirs(self.cwd)
        self.results: dict[str, dict[str, list[float]]] = {}
        self.failures: dict[str, str] = {}
        self.seq = 0

    def _run(self, argv: list[str], timeout: float, sample_rss: bool = False) -> tuple[dict | None, str, float]:
        """Run a child; return (its JSON, the tail of its output on failure, peak tree RSS MiB)."""
        self.seq += 1
        out = os.path.join(self.tmp, f"out{self.seq}.json")
        log = os.path.join(self.tmp, f"log{self.seq}.txt")
        with open(log, "wb") as logf:
            proc = subprocess.Popen([self.args.python, *argv, "--out", out], env=self.env, cwd=self.cwd,
                                    stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
            peak = 0
            deadline = time.monotonic() + timeout
            psproc = None
            if sample_rss:
                import psutil

                try:
                    psproc = psutil.Process(proc.pid)
                except psutil.Error:
                    psproc = None
            while proc.poll() is None:
                if time.monotonic() > deadline:
                    os.killpg(proc.pid, 9)
                    proc.wait()
                    break
                if psproc is not None:
                    # proportional set sizes: a child forked a moment before its exec (nb's
                    # provenance runs git) shares its parent's pages, and summing resident
                    # sets counted them twice (a 283 MiB "peak" for nb in one sample)
                    try:
                        total = psproc.memory_full_info().pss
                        for c in psproc.children(recursive=True):
                            try:
                                total += c.memory_full_info().pss
                            except Exception:
                                pass
                        peak = max(peak, total)
                    except Exception:
                        pass
                time.sleep(0.2 if psproc is not None else 0.05)
            # a helper left running (wandb-core waits a little after its parent) is ended
            try:
                os.killpg(proc.pid, 9)
            except (ProcessLookupError, PermissionError):
                pass
        if proc.returncode == 0 and os.path.exists(out):
            with open(out) as f:
                return json.load(f), "", peak / 2**20
        with open(log, "rb") as f:
            tail = f.read()[-1500:].decode(errors="replace")
        why = "timed out" if proc.returncode == -9 else f"exit {proc.returncode}"
        return None, f"{why}: {tail.strip().splitlines()[-1] if tail.strip() else ''}", peak / 2**20

    def add(self, tool: str, figures: dict) -> None:
        bucket = self.results.setdefault(tool, {})
        for k, v in figures.items():
            bucket.setdefault(k, []).append(v)

    def available(self, tool: str) -> str | None:
        """None when the tool imports in the peers' interpreter, else why not."""
        code = f"import {MODULE[tool]}"
        r = subprocess.run([self.args.python, "-c", code], env=self.env, cwd=self.cwd,
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            lines = (r.stderr or r.stdout).strip().splitlines()
            return lines[-1] if lines else f"exit {r.returncode}"
        return None

    def version(self, tool: str) -> str:
        if tool == "nb":
            code = "import nblog; print(nblog.__version__)"
        else:
            code = f"import importlib.metadata as m; print(m.version({tool!r}))"
        r = subprocess.run([self.args.python, "-c", code], env=self.env, cwd=self.cwd,
                           capture_output=True, text=True, timeout=300)
        return r.stdout.strip().splitlines()[-1] if r.returncode == 0 and r.stdout.strip() else "?"

    def write(self, tool: str, rep: int) -> None:
        store = os.path.join(self.tmp, "stores", f"{tool}-w{self.seq}")
        if tool == "trackio":
            store = self.env["TRACKIO_DIR"]
        fig, why, peak = self._run([__file__, "--worker", "write", "--tool", tool, "--store", store,
                                    "--points", str(self.args.points), "--cap-s", str(self.args.cap_s),
                                    "--nonlog-calls", str(self.args.nonlog_calls)],
                                   timeout=self.args.timeout, sample_rss=True)
        if fig is None:
            self.failures[f"{tool} write (repeat {rep + 1})"] = why
            return
        fig["rss_mib"] = max(peak, fig.pop("ru_maxrss_mib")) - fig["baseline_rss_mib"]
        self.add(tool, fig)
        if tool != "trackio":
            shutil.rmtree(store, ignore_errors=True)

    def prep(self, tool: str) -> None:
        fig, why, _ = self._run([__file__, "--worker", "prep", "--tool", tool, "--store", self.store(tool),
                                 "--read-points", str(self.args.read_points)], timeout=self.args.timeout)
        if fig is None:
            self.failures[f"{tool} writing the read set"] = why
            return
        self.add(tool, fig)

    def store(self, tool: str) -> str:
        return self.env["TRACKIO_DIR"] if tool == "trackio" else os.path.join(self.tmp, "stores", f"{tool}-read")

    def read(self, tool: str, rep: int) -> None:
        if "prep_s" not in self.results.get(tool, {}):
            return
        fig, why, _ = self._run([__file__, "--worker", "read", "--tool", tool, "--store", self.store(tool),
                                 "--read-points", str(self.args.read_points)], timeout=self.args.timeout)
        if fig is None:
            self.failures[f"{tool} read (repeat {rep + 1})"] = why
            return
        self.add(tool, fig)

    def import_time(self, tool: str) -> None:
        code = (f"import torch, time; t = time.perf_counter(); import {MODULE[tool]}; "
                "print(time.perf_counter() - t)")
        r = subprocess.run([self.args.python, "-c", code], env=self.env, cwd=self.cwd,
                           capture_output=True, text=True, timeout=300)
        if r.returncode == 0:
            self.add(tool, {"import_ms": float(r.stdout.strip().splitlines()[-1]) * 1000})


ROWS = (
    # key, label
    ("scalar_us", "µs per scalar, training thread"),
    ("dict_us", "µs per dict of 10, training thread"),
    ("scalar_close_us", "µs per scalar incl. finish/close"),
    ("dict_close_us", "µs per dict of 10 incl. finish/close"),
    ("close_ms", "finish/close after the 1-tag loop (ms)"),
    ("calls_scalar", "scalar calls timed (cap)"),
    ("init_s", "init, first run in an empty store (s)"),
    ("rss_mib", "peak RSS above torch (MiB)"),
    ("bytes_scalar", "bytes on disk per point, 1-tag loop"),
    ("bytes_readset", "bytes on disk per point, read set"),
    ("nonlog_scalar_ns", "non-logging rank: ns per scalar call"),
    ("nonlog_dict_ns", "non-logging rank: ns per dict of 10 built at the call"),
    ("disabled_ns", "mode=\"disabled\": ns per scalar call"),
    ("import_ms", "import, torch already imported (ms)"),
    ("read_s", "read the read set into a frame (s)"),
)
NO_RATIO = {"calls_scalar"}


def num(v: float) -> str:
    """Three significant figures, thousands grouped, never an exponent."""
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    if abs(v) >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}" if abs(v) >= 0.001 else f"{v:.1e}"


def cell(vals: list[float] | None, ref: list[float] | None, ratio: bool) -> str:
    """``median (min–max) ratio×`` of one tool's figure; ratio = its median / nb's median."""
    if not vals:
        return "–"
    med = statistics.median(vals)
    s = num(med)
    if len(vals) > 1 and min(vals) != max(vals):
        s += f" ({num(min(vals))}–{num(max(vals))})"
    if ratio and ref:
        rmed = statistics.median(ref)
        if rmed > 0:
            s += f" **{num(med / rmed)}×**"
    return s


def table(drv: Driver, tools: list[str]) -> str:
    res = drv.results
    head = "| measure | " + " | ".join(tools) + " |"
    lines = [head, "|" + " --- |" * (len(tools) + 1)]
    for key, label in ROWS:
        if key == "read_s":
            label = f"read {drv.args.read_points:,} points into a frame (s)"
        if not any(res.get(t, {}).get(key) for t in tools):
            continue
        cells = []
        for t in tools:
            vals = res.get(t, {}).get(key)
            if key == "read_s" and t == "wandb":
                cells.append("no local reader")
                continue
            ref = res.get("nb", {}).get(key) if t != "nb" else None
            cells.append(cell(vals, ref, key not in NO_RATIO))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=100_000, help="points per timed loop (default 100,000)")
    ap.add_argument("--cap-s", type=float, default=10.0, help="seconds a timed loop may take (default 10)")
    ap.add_argument("--read-points", type=int, default=1_000_000, help="points in the read set (default 1,000,000)")
    ap.add_argument("--nonlog-calls", type=int, default=200_000, help="calls timed on a non-logging rank")
    ap.add_argument("--repeat", type=int, default=3, help="repeats, tools interleaved (default 3)")
    ap.add_argument("--only", default="", help="comma-separated tools, e.g. nb,tensorboard (nb is always in)")
    ap.add_argument("--no-read", action="store_true", help="skip the read set and the read figures")
    ap.add_argument("--parts", default="write,read,import",
                    help="comma-separated parts to measure: write (the training-thread loops, RSS, bytes, "
                         "non-logging rank), read (the read set), import (default: all three)")
    ap.add_argument("--python", default=sys.executable, help="the interpreter that has the peers")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds before a child is killed")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    ap.add_argument("--nb-path", default=REPO, help="the folder holding the nblog package to measure (default: this checkout)")
    ap.add_argument("--compile-nb", action="store_true",
                    help="write the bytecode of the nblog under --nb-path first, as pip install does (the peers' "
                         "installed packages have theirs); else, under PYTHONDONTWRITEBYTECODE, every child "
                         "compiles nblog's modules again")
    # worker mode (internal)
    ap.add_argument("--worker", choices=("write", "prep", "read"), help=argparse.SUPPRESS)
    ap.add_argument("--tool", help=argparse.SUPPRESS)
    ap.add_argument("--store", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker:
        if args.worker == "write":
            fig = worker_write(args.tool, args.store, args.points, args.cap_s, args.nonlog_calls)
        elif args.worker == "prep":
            fig = worker_prep(args.tool, args.store, args.read_points)
        else:
            fig = worker_read(args.tool, args.store, args.read_points)
        with open(args.out, "w") as f:
            json.dump(fig, f)
        return

    wanted = [t.strip() for t in args.only.split(",") if t.strip()] if args.only else list(TOOLS)
    unknown = [t for t in wanted if t not in TOOLS]
    if unknown:
        ap.error(f"unknown tool(s) {', '.join(unknown)}; known: {', '.join(TOOLS)}")
    if args.repeat < 1 or args.points < 10 or args.read_points < len(TAGS):
        ap.error("--repeat must be >= 1, --points >= 10, --read-points >= 10")
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if not parts or parts - {"write", "read", "import"}:
        ap.error("--parts takes write, read and import, comma-separated")
    if "read" not in parts:
        args.no_read = True
    if args.compile_nb:
        subprocess.run([args.python, "-m", "compileall", "-q", os.path.join(args.nb_path, "nblog")], check=True,
                       env={**os.environ, "PYTHONDONTWRITEBYTECODE": ""}, stdout=subprocess.DEVNULL)
    tmp = tempfile.mkdtemp(prefix="nb-bench-peers-")
    started = time.time()
    load0 = os.getloadavg()
    drv = Driver(args, tmp)
    try:
        skipped: dict[str, str] = {}
        tools = ["nb"]
        for t in TOOLS[1:]:
            if t not in wanted:
                continue
            why = drv.available(t)
            if why:
                skipped[t] = why
            else:
                tools.append(t)
        why = drv.available("nb")
        if why:
            raise SystemExit(f"nblog does not import from {args.nb_path}: {why}")
        versions = {t: drv.version(t) for t in tools}
        peers = tools[1:]
        print(f"tools: {', '.join(f'{t} {versions[t]}' for t in tools)}", file=sys.stderr)
        for t, why in skipped.items():
            print(f"skipped {t}: {why}", file=sys.stderr)
        if not args.no_read:
            for t in tools:
                if t in READER_MODULE:
                    print(f"writing the read set: {t}", file=sys.stderr)
                    drv.prep(t)
        for rep in range(args.repeat):
            for peer in peers or ["nb"]:
                for t in dict.fromkeys(("nb", peer)):  # nb, then the peer (nb once if alone)
                    print(f"repeat {rep + 1}/{args.repeat}: {t}", file=sys.stderr)
                    if "write" in parts:
                        drv.write(t, rep)
                    if not args.no_read and t in READER_MODULE:
                        drv.read(t, rep)
                    if "import" in parts:
                        drv.import_time(t)
    finally:
        if args.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    load1 = os.getloadavg()
    print(f"### nb and its peers, side by side ({time.strftime('%Y-%m-%d')})\n")
    print(table(drv, tools))
    print()
    print(f"Medians (min–max) of {args.repeat} repeats, tools interleaved (nb, peer, nb, peer, ...); "
          f"**ratio = peer / nb** (above 1: nb is cheaper). nb's figures pool its runs beside every peer.")
    print(f"Versions: {', '.join(f'{t} {versions[t]}' for t in tools)}; Python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs. Load average {load0[0]:.2f} at the start, {load1[0]:.2f} at the end; "
          f"{(time.time() - started) / 60:.1f} min.")
    print(f"Workload: up to {args.points:,} points per timed loop or {args.cap_s:g} s; read set "
          f"{args.read_points:,} points (10 tags). Non-logging rank: nb's inert run; the peers "
          f"an `if rank == 0:` guard (the same code for each).")
    if "wandb" in tools:
        print("wandb offline has no local reader: its runs are read back from the server after `wandb sync`.")
    for t, why in skipped.items():
        print(f"Skipped {t}: {why}")
    for what, why in drv.failures.items():
        print(f"Failed: {what}: {why}")
    print("\n`scripts/bench_peers.py " + " ".join(sys.argv[1:]) + "`")


if __name__ == "__main__":
    main()
