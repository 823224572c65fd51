"""What ``nb diff RUN_A RUN_B [RUN_C...]`` reports: how runs differ, as one JSON-able dict.

The first run is the base. Sections:

- config: every leaf key (nested keys dotted) whose value is not the same in every run:
  "added" (not in the base, in another run), "removed" (in the base, missing from
  another run) or "changed";
- environment: world size, writing ranks, machines and hosts (rank 0's from run.json,
  the others' from their event logs' headers), launcher, job id and
  where ids came from, versions (nblog, format, and the OS / GPU driver of the machines
  when system metrics were on);
- sessions: how many, and per session number its host, world size, steps, end reason;
- tags: the last value (and its step), min and max of each scalar tag of rank 0 every
  run has, and the tags only some runs have.
- code: what code ran, from rank 0's provenance of its latest session (commit, branch,
  dirty, the uncommitted diff's size and hash, remote, command line, executable, Python,
  torch / CUDA / NCCL, numpy), and the installed distributions whose versions differ.

``differ`` says whether a difference that is counted was found: config, environment
and session fields count, except those that differ between any two runs by nature
(job id, hosts, times, durations); tag values never count (two runs of one config
rarely log equal floats), a tag missing from some runs does; code fields count when
every run recorded its provenance, except branch, remote, command line and executable
(paths and output folders differ between runs of one code), as do differing packages.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...format._walk import read_header
from .._runfiles.progress import session_steps
from .._runfiles.rankfiles import event_files
from .._views.reader import RunReader
from .._views.tag_stats import tag_stats
from .catalog import run_row
from .query import flat_config

_ABSENT = object()
#: (key, label, counted) of the environment section, in order
ENV_FIELDS = (
    ("world_size", "world size", True),
    ("ranks", "writing ranks", True),
    ("machines", "machines", True),
    ("hosts", "hosts", False),
    ("launcher", "launcher", True),
    ("job_id", "job id", False),
    ("job_id_source", "job id from", True),
    ("run_id_source", "run id from", True),
    ("nblog_version", "nblog version", True),
    ("format_version", "format version", True),
    ("os", "os", True),
    ("gpus", "gpus", True),
    ("driver_version", "gpu driver", True),
)
#: (key, label, counted) of each session in the sessions section
SESSION_FIELDS = (
    ("start", "started", False),
    ("host", "host", False),
    ("world_size", "world size", True),
    ("first_step", "first step", True),
    ("last_step", "last step", True),
    ("end_reason", "end reason", True),
    ("duration_s", "duration", False),
)


def label(i: int) -> str:
    """The label of the ``i``-th run: A, B, ..., Z, then R27, R28, ..."""
    return chr(ord("A") + i) if i < 26 else f"R{i + 1}"


def _same(values: Sequence[object]) -> bool:
    first = values[0]
    return all(v == first and type(v) is type(first) for v in values[1:])


def config_diff(configs: Sequence[object]) -> tuple[list[dict], int]:
    """The leaves of the nested ``configs`` that differ (base: the first), and how many
    leaves are the same in all. Each entry: key (dotted), change ("added", "removed",
    "changed"), present (per run: whether it has the key), values (per run; None when
    absent)."""
    flats = [flat_config(c) for c in configs]
    keys = sorted(set().union(*flats), key=str)
    out, equal = [], 0
    for key in keys:
        vals = [f.get(key, _ABSENT) for f in flats]
        if _same(vals):
            equal += 1
            continue
        present = [v is not _ABSENT for v in vals]
        change = "added" if not present[0] else "removed" if not all(present) else "changed"
        out.append({"key": key, "change": change, "present": present,
                    "values": [None if v is _ABSENT else v for v in vals]})
    return out, equal


def _log_hosts(run_dir: str) -> set[str]:
    """The hosts named in the headers of the run's event logs (every writing rank and
    session), read without loading the logs."""
    hosts: set[str] = set()
    for path in event_files(run_dir).values():
        host = read_header(path).get("host")
        if isinstance(host, str) and host:
            hosts.add(host)
    return hosts


def _environment(reader: RunReader, row: dict) -> dict:
    meta = reader.meta
    machines = reader.machines()
    # rank 0 records its own host in run.json; the other ranks' are in their logs' headers
    hosts = {str(h) for h in meta.get("hosts") or [] if h} if isinstance(meta.get("hosts"), list) else set()
    hosts |= _log_hosts(reader.dir)

    def distinct(key: str) -> str | None:
        found = sorted({str(m[key]) for m in machines if m.get(key) not in (None, "")})
        return ", ".join(found) or None

    gpus = [m["gpus"] for m in machines if isinstance(m.get("gpus"), list)]
    return {
        "world_size": meta.get("world_size"),
        "ranks": row["ranks"],
        "machines": len(hosts) or None,
        "hosts": ", ".join(sorted(hosts)) or None,
        "launcher": meta.get("launcher"),
        "job_id": meta.get("job_id"),
        "job_id_source": meta.get("job_id_source"),
        "run_id_source": meta.get("run_id_source"),
        "nblog_version": meta.get("nblog_version"),
        "format_version": meta.get("format_version"),
        "os": distinct("os"),
        "gpus": sum(len(g) for g in gpus) if gpus else None,
        "driver_version": distinct("driver_version"),
    }


def _sessions(meta: dict) -> list[dict]:
    return [s for s in meta.get("sessions") or [] if isinstance(s, dict)]


#: (key, label, counted) of the code section: rank 0's provenance of its latest session
CODE_FIELDS = (
    ("commit", "commit", True),
    ("branch", "branch", False),
    ("dirty", "dirty", True),
    ("diff", "uncommitted diff", True),
    ("remote", "remote", False),
    ("command", "command", False),
    ("executable", "executable", False),
    ("python", "python", True),
    ("torch", "torch", True),
    ("cuda", "cuda", True),
    ("nccl", "nccl", True),
    ("numpy", "numpy", True),
)
_MAX_DIFF_READ = 1 << 21  # the diff file holds at most 1 MiB (write/_provenance.DIFF_LIMIT)


def _dict(v: object) -> dict:
    """``v`` if it is a dict, else an empty one (a record written by another version)."""
    return v if isinstance(v, dict) else {}


def _code(run_dir: str) -> tuple[dict | None, dict]:
    """(rank 0's provenance record of its latest session or None, its CODE_FIELDS values)."""
    import hashlib
    import os
    import shlex

    from ...format._runfile import open_regular
    from .._runfiles.provenance import provenance

    records = [p for p in provenance(run_dir) if p.get("rank") == 0 and isinstance(p.get("session"), int)]
    rec = max(records, key=lambda p: p["session"]) if records else None
    if rec is None:
        return None, {k: None for k, _l, _c in CODE_FIELDS}
    git, libs, python = _dict(rec.get("git")), _dict(rec.get("libraries")), _dict(rec.get("python"))
    torch = _dict(libs.get("torch"))
    argv = rec.get("argv")
    diff = None
    name = git.get("diff_file")
    if isinstance(name, str) and os.path.basename(name) == name and name:
        try:
            with open_regular(os.path.join(run_dir, name)) as f:
                data = f.read(_MAX_DIFF_READ)
            diff = f"{len(data)} B, sha256 {hashlib.sha256(data).hexdigest()[:12]}"
        except OSError:
            diff = None

    def text(v: object) -> str | None:
        return v if isinstance(v, str) else None

    return rec, {
        "commit": text(git.get("commit")),
        "branch": text(git.get("branch")),
        "dirty": git.get("dirty") if isinstance(git.get("dirty"), bool) else None,
        "diff": diff,
        "remote": text(git.get("remote")),
        "command": shlex.join(str(a) for a in argv) if isinstance(argv, list) else None,
        "executable": text(rec.get("executable")),
        "python": text(python.get("version")),
        "torch": text(torch.get("version")),
        "cuda": text(torch.get("cuda")),
        "nccl": text(torch.get("nccl")),
        "numpy": text(libs.get("numpy")),
    }


def code_diff(run_dirs: Sequence[str]) -> dict:
    """What code ran in each run, side by side: rank 0's provenance of its latest session.

    Keys: records (per run: the provenance file read, or None when the run has none),
    fields (per field of :data:`CODE_FIELDS`: field, label, values, differs, counted:
    a field counts only when every run has a record), packages (the installed
    distributions whose versions differ: name, versions (per run; None where it is not
    installed), by name; empty unless every run has a record).
    """
    recs, values = zip(*(_code(d) for d in run_dirs), strict=True)
    every = all(r is not None for r in recs)
    fields = []
    for key, name, count in CODE_FIELDS:
        vals = [v[key] for v in values]
        fields.append({"field": key, "label": name, "values": vals, "differs": not _same(vals),
                       "counted": count and every})
    dists = [r.get("distributions") if r is not None and isinstance(r.get("distributions"), dict) else {}
             for r in recs]
    packages = []
    for pkg in sorted(set().union(*dists) if every else (), key=lambda n: (str(n).lower(), str(n))):
        versions = [d.get(pkg) if isinstance(d.get(pkg), str) else None for d in dists]
        if not _same(versions):
            packages.append({"name": pkg, "versions": versions})
    return {"records": [r.get("file") if r is not None else None for r in recs], "fields": fields,
            "packages": packages}


def diff_runs(runs: Sequence[str], root: str | None = None) -> dict:
    """How the runs ``runs`` (ids, prefixes, paths: as :class:`RunReader` takes them)
    differ; see the module docstring for the sections.

    Keys: runs (label, id, project, name, status, path), differ (bool), config
    (changes: :func:`config_diff`'s entries, equal: how many leaves are the same),
    environment (per field of :data:`ENV_FIELDS`: field, label, values, differs,
    counted), sessions (count: per run; fields: per session number and field of
    :data:`SESSION_FIELDS`: session, field, label, values (None where the run has no
    such session), differs, counted), tags (common: tag, last, step, min, max (lists,
    one per run; non-finite values as floats), differs; only_some: tag, runs (labels
    of the runs that have it)), code (:func:`code_diff`).

    Raises:
        RunNotFoundError, AmbiguousRunError: a run is not found.
        ValueError: fewer than two runs.
    """
    if len(runs) < 2:
        raise ValueError("nb diff needs at least two runs")
    readers = [RunReader(r, root) for r in runs]
    rows = [run_row(r.dir) for r in readers]
    metas = [r.meta for r in readers]
    counted = False

    out_runs = [{"label": label(i), "id": row["id"], "project": row["project"], "name": row["name"],
                 "status": row["status"], "path": row["path"]} for i, row in enumerate(rows)]
    changes, equal = config_diff([m.get("config") if isinstance(m.get("config"), dict) else {} for m in metas])
    counted |= bool(changes)

    envs = [_environment(r, row) for r, row in zip(readers, rows, strict=True)]
    environment = []
    for key, name, count in ENV_FIELDS:
        vals = [e[key] for e in envs]
        differs = not _same(vals)
        counted |= differs and count
        environment.append({"field": key, "label": name, "values": vals, "differs": differs, "counted": count})

    sess = [_sessions(m) for m in metas]
    for r, ss in zip(readers, sess, strict=True):  # each last step as every view says it (_progress)
        steps = session_steps(r.dir, ss)
        for i, s in enumerate(ss):
            if s.get("session") in steps:
                ss[i] = {**s, "last_step": steps[s["session"]]}
    counts = [len(s) for s in sess]
    counted |= not _same(counts)
    numbers = sorted({s["session"] for ss in sess for s in ss if isinstance(s.get("session"), int)})
    fields = []
    for n in numbers:
        by_run = [next((s for s in ss if s.get("session") == n), None) for ss in sess]
        for key, name, count in SESSION_FIELDS:
            vals = [None if s is None else s.get(key) for s in by_run]
            differs = not _same(vals)
            counted |= differs and count
            fields.append({"session": n, "field": key, "label": name, "values": vals, "differs": differs,
                           "counted": count})

    sums = [tag_stats(r.dir, m) for r, m in zip(readers, metas, strict=True)]
    all_tags = sorted(set().union(*sums))
    common, only = [], []
    for tag in all_tags:
        have = [tag in s for s in sums]
        if not all(have):
            only.append({"tag": tag, "runs": [label(i) for i, h in enumerate(have) if h]})
            continue
        entry: dict = {"tag": tag}
        for stat in ("last", "step", "min", "max"):
            entry[stat] = [s[tag].get(stat) for s in sums]
        entry["differs"] = any(not _same_numbers(entry[stat]) for stat in ("last", "step", "min", "max"))
        common.append(entry)
    counted |= bool(only)
    code = code_diff([r.dir for r in readers])
    counted |= any(f["differs"] and f["counted"] for f in code["fields"]) or bool(code["packages"])
    return {
        "runs": out_runs,
        "differ": counted,
        "config": {"changes": changes, "equal": equal},
        "environment": environment,
        "sessions": {"count": counts, "fields": fields},
        "tags": {"common": common, "only_some": only},
        "code": code,
    }


def _same_numbers(values: Sequence[object]) -> bool:
    """Equal, NaN counting as equal to NaN."""
    def key(v: object) -> object:
        return "nan" if isinstance(v, float) and v != v else v

    return len({key(v) for v in values}) == 1


__all__ = ["CODE_FIELDS", "ENV_FIELDS", "SESSION_FIELDS", "code_diff", "config_diff", "diff_runs", "label"]
