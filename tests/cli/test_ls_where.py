"""nb ls --where/--columns/--sort/--desc/--group against a Polars reference, on 500 runs
written by real nblog processes (sweep drivers calling init/add_scalar/finish in a loop)
with random nested configs; bad expressions are usage errors (exit 2) with a message."""

from __future__ import annotations

import json
import math
import random
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from cli_helpers import clean_env

import nblog.reader._runs.query as rq
from nblog.reader._runs.query import quote_keys

SWEEP = Path(__file__).with_name("_sweep_writer.py")
NB = [sys.executable, "-c", "from nbcli.app import main; main()"]
N_RUNS, N_PROCS = 500, 4
LRS = [1e-4, 3e-4, 1e-3, 3e-3]


def _spec(i: int, rnd: random.Random) -> dict:
    config: dict = {
        "optim": {"lr": rnd.choice(LRS), "name": rnd.choice(["adam", "sgd", "lion"]),
                  "sched": {"warmup": rnd.randint(0, 3) * 100, "kind": rnd.choice(["cos", "lin"])}},
        "model": {"layers": rnd.randint(1, 6), "width": rnd.choice([64, 128, 256])},
        "seed": i,
    }
    if rnd.random() < 0.5:
        config["model"]["dropout"] = rnd.choice([0.0, 0.1, 0.2])
    if rnd.random() < 0.3:
        config["optim"]["betas"] = [0.9, rnd.choice([0.95, 0.99])]
    loss = [round(rnd.uniform(0.01, 2.0), 6) for _ in range(rnd.randint(1, 6))]
    if len(loss) > 2 and rnd.random() < 0.1:
        loss[1] = float("nan")  # min and max ignore it; it is not the last value
    run = {"id": f"s{i:04d}", "name": f"trial{i % 7}", "config": config, "loss": loss,
           "fail": rnd.random() < 0.1}
    if rnd.random() < 0.8:
        run["acc"] = [round(rnd.random(), 6) for _ in range(rnd.randint(1, 3))]
    return run


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> tuple[Path, list[dict]]:
    root = tmp_path_factory.mktemp("sweep") / "runs"
    rnd = random.Random(1234)
    specs = [_spec(i, rnd) for i in range(N_RUNS)]
    procs = []
    for p in range(N_PROCS):
        path = root.parent / f"spec{p}.json"
        path.write_text(json.dumps({"project": "sweep", "runs": specs[p::N_PROCS]}))
        procs.append(subprocess.Popen([sys.executable, str(SWEEP), f"@{path}"], env=clean_env(NB_DIR=str(root)),
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for proc in procs:
        _out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
    return root, specs


# -- the reference: run.json read with json, configs flattened and tag values taken from
# what the sweep logged, filtered/sorted/grouped by Polars directly


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = json.dumps(v, separators=(",", ":")) if isinstance(v, list) else v
    return out


def _stats(values: list[float]) -> dict:
    finite = [v for v in values if not math.isnan(v)]
    return {"last": values[-1], "step": len(values) - 1, "min": min(finite), "max": max(finite)}


@pytest.fixture(scope="module")
def reference(sweep) -> pl.DataFrame:
    root, specs = sweep
    by_id = {s["id"]: s for s in specs}
    records = []
    for path in (root / "sweep").iterdir():
        meta = json.loads((path / "run.json").read_text())
        spec = by_id[path.name]
        rec = {"id": path.name, "status": meta["status"], "started": meta["created"], "ranks": 1,
               "sessions": len(meta["sessions"]), "name": meta["name"], **_flat(meta["config"])}
        for tag, key in (("train/loss", "loss"), ("val/acc", "acc")):
            if key in spec:
                st = _stats(spec[key])
                rec[tag] = st["last"]
                rec.update({f"{tag}.{s}": v for s, v in st.items()})
        records.append(rec)
    frame = pl.DataFrame(records, infer_schema_length=None)
    return frame.sort(["started", "id"], descending=True)  # nb ls's order: newest first


def _ids(frame: pl.DataFrame) -> list[str]:
    return frame["id"].to_list()


def _ls_json(cli, root: Path, *args: str) -> list[dict]:
    result = cli("ls", "--root", str(root), *args, "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


WHERES = [
    # (what a user writes, the same with every key quoted as SQL needs it)
    ("optim.lr < 3e-4", '"optim.lr" < 3e-4'),
    ("optim.name = 'adam' and model.layers >= 3", "\"optim.name\" = 'adam' and \"model.layers\" >= 3"),
    ("train/loss.min < 0.3 and optim.lr >= 1e-3", '"train/loss.min" < 0.3 and "optim.lr" >= 1e-3'),
    ("train/loss < 0.5 or status = 'failed'", "\"train/loss\" < 0.5 or status = 'failed'"),
    ("optim.betas is not null and model.dropout > 0", '"optim.betas" is not null and "model.dropout" > 0'),
    ("model.layers in (1, 3) and not (seed between 10 and 300)",
     '"model.layers" in (1, 3) and not (seed between 10 and 300)'),
    ("val/acc.max > 0.5 and ranks = 1 and optim.sched.kind <> 'cos'",
     "\"val/acc.max\" > 0.5 and ranks = 1 and \"optim.sched.kind\" <> 'cos'"),
    ("train/loss.step = 4 and name like 'trial1%'", "\"train/loss.step\" = 4 and name like 'trial1%'"),
    ("val/acc is null", '"val/acc" is null'),
    ('"optim.sched.warmup" >= 200 and "train/loss.max" - "train/loss.min" > 1',
     '"optim.sched.warmup" >= 200 and "train/loss.max" - "train/loss.min" > 1'),
    # issue 22: a quoted name with a statistic after it, as SQL users write it, is one key
    ('"train/loss".last > 0.1', '"train/loss.last" > 0.1'),
    ('"val/acc".max > 0.5 and optim."name" = \'adam\' and "train/loss"."min" < 0.5',
     '"val/acc.max" > 0.5 and "optim.name" = \'adam\' and "train/loss.min" < 0.5'),
]


@pytest.mark.parametrize(("where", "quoted"), WHERES)
def test_where_matches_polars(cli, sweep, reference, where, quoted):
    root, _specs = sweep
    want = _ids(reference.filter(pl.sql_expr(quoted)))
    got = [r["id"] for r in _ls_json(cli, root, "--where", where)]
    assert got == want
    assert 0 < len(want) < N_RUNS or where == "val/acc is null"


@pytest.mark.parametrize(("key", "desc"), [("train/loss.min", False), ("optim.lr", True), ("val/acc", False),
                                           ("model.dropout", True), ("started", False)])
def test_sort_matches_polars(cli, sweep, reference, key, desc):
    root, _specs = sweep
    want = _ids(reference.sort(key, descending=desc, nulls_last=True, maintain_order=True))
    args = ["--sort", key] + (["--desc"] if desc else [])
    assert [r["id"] for r in _ls_json(cli, root, *args)] == want


def test_where_sort_and_columns_together(cli, sweep, reference):
    root, _specs = sweep
    ref = reference.filter(pl.sql_expr("\"optim.name\" = 'sgd'")).sort("train/loss.last", maintain_order=True)
    got = _ls_json(cli, root, "--where", "optim.name = 'sgd'", "--sort", "train/loss.last", "-c",
                   "optim.lr,train/loss.last", "--columns", "model.width")
    assert [list(r) for r in got[:1]] == [["id", "optim.lr", "train/loss.last", "model.width"]]
    assert [(r["id"], r["optim.lr"], r["train/loss.last"], r["model.width"]) for r in got] == list(
        ref.select("id", "optim.lr", "train/loss.last", "model.width").iter_rows())


def test_group_matches_polars(cli, sweep, reference):
    root, _specs = sweep
    got = _ls_json(cli, root, "--group", "optim.lr", "--columns", "train/loss.min,status", "--where",
                   "model.layers > 1")
    ref = (reference.filter(pl.col("model.layers") > 1)
           .group_by("optim.lr", maintain_order=True)
           .agg(pl.len().alias("runs"), pl.col("id"), pl.col("train/loss.min").mean().alias("mean"),
                pl.col("train/loss.min").min().alias("min"), pl.col("train/loss.min").max().alias("max"),
                pl.col("status").unique().sort().alias("statuses"))
           .sort("optim.lr"))
    assert [g["optim.lr"] for g in got] == ref["optim.lr"].to_list() == sorted(LRS)
    for g, r in zip(got, ref.iter_rows(named=True), strict=True):
        assert g["runs"] == r["runs"] and g["ids"] == [f"sweep/{i}" for i in r["id"]]
        assert g["train/loss.min"] == pytest.approx({"mean": r["mean"], "min": r["min"], "max": r["max"]})
        assert g["status"] == {"values": r["statuses"]}


def test_group_sorted_by_the_mean_of_a_key(cli, sweep, reference):
    root, _specs = sweep
    ref = (reference.group_by("model.width").agg(pl.col("train/loss.min").mean().alias("m"))
           .sort("m", descending=True))
    for extra in ([], ["-c", "optim.lr"]):  # the --sort key is aggregated also when --columns does not name it
        got = _ls_json(cli, root, "--group", "model.width", "--sort", "train/loss.min", "--desc", *extra)
        assert [g["model.width"] for g in got] == ref["model.width"].to_list()
        assert [g["train/loss.min"]["mean"] for g in got] == pytest.approx(ref["m"].to_list())


def test_plain_and_piped_forms_carry_the_selected_columns(cli, sweep, reference):
    root, _specs = sweep
    result = cli("ls", "--root", str(root), "--where", "seed < 3", "-c", "optim.lr,train/loss.min,status,optim.betas")
    assert result.exit_code == 0, result.stderr
    lines = [line.split("\t") for line in result.stdout.splitlines()]
    assert lines[0] == ["ID", "optim.lr", "train/loss.min", "status", "optim.betas"]
    ref = reference.filter(pl.col("seed") < 3)
    assert [line[0] for line in lines[1:]] == _ids(ref)
    for line, r in zip(lines[1:], ref.iter_rows(named=True), strict=True):
        assert float(line[1]) == r["optim.lr"] and line[3] == r["status"]
        assert float(line[2]) == pytest.approx(r["train/loss.min"], rel=1e-5)
        assert line[4] == (r["optim.betas"] or "-")
    # without --columns: the default columns, then the keys --where and --sort name
    result = cli("ls", "--root", str(root), "--where", "seed < 3 and status = 'finished'", "--sort", "val/acc")
    head = result.stdout.splitlines()[0].split("\t")
    assert head == ["ID", "PROJECT", "NAME", "STATUS", "RANKS", "SESSIONS", "LAST STEP", "STARTED", "DURATION",
                    "seed", "val/acc"]
    rows = _ls_json(cli, root, "--where", "seed < 3")
    assert set(rows[0]) >= {"id", "project", "status", "started", "path", "seed"}


def test_tag_values_are_read_only_for_the_runs_the_rest_of_where_leaves(cli, sweep, reference, monkeypatch):
    """A query on fields and config keys reads no event log; one that also names a tag
    reads the tags of the runs its tag-free AND terms keep, and of no other."""
    root, _specs = sweep
    seen: list[str] = []
    real = rq.tag_stats

    def spy(run_dir, meta=None):
        seen.append(run_dir)
        return real(run_dir, meta)

    monkeypatch.setattr(rq, "tag_stats", spy)
    assert len(_ls_json(cli, root, "--where", "optim.lr < 3e-4 and model.layers > 2", "--sort", "optim.lr")) > 0
    assert seen == []
    got = _ls_json(cli, root, "--where", "optim.name = 'lion' and train/loss.min < 0.5 and seed < 250")
    base = reference.filter(pl.sql_expr("\"optim.name\" = 'lion' and seed < 250"))
    assert sorted(Path(p).name for p in seen) == sorted(_ids(base))
    assert [r["id"] for r in got] == _ids(base.filter(pl.col("train/loss.min") < 0.5))


def test_run_json_summary_is_used_when_present(cli, sweep, tmp_path):
    """The writer's summary in run.json (nb-format(5)) wins over the event logs; its
    non-finite values are the strings "nan"/"inf"/"-inf"."""
    root, _specs = sweep
    dst = tmp_path / "runs" / "sweep"
    dst.mkdir(parents=True)
    for name in ("s0001", "s0002", "s0003"):
        shutil.copytree(root / "sweep" / name, dst / name)
    for name, summary in (("s0001", {"train/loss": {"last": 0.5, "step": 40, "min": 0.25, "max": "inf"}}),
                          ("s0002", {"train/loss": {"last": "nan", "step": 41, "min": 0.125, "max": 9.0}}),
                          ("s0003", {})):
        meta = json.loads((dst / name / "run.json").read_text())
        meta["summary"] = summary
        (dst / name / "run.json").write_text(json.dumps(meta))
    got = _ls_json(cli, tmp_path / "runs", "-c", "train/loss,train/loss.step,train/loss.min,train/loss.max",
                   "--sort", "train/loss.min")
    assert [(r["id"], r["train/loss"], r["train/loss.step"], r["train/loss.min"], r["train/loss.max"])
            for r in got] == [("s0002", "nan", 41, 0.125, 9.0), ("s0001", 0.5, 40, 0.25, "inf"),
                              ("s0003", None, None, None, None)]


def test_mixed_kinds_lists_and_config_prefix(cli, tmp_path):
    """A key that is a number in one run and text in another compares as text; a
    field's name is a config key with config. in front."""
    root = tmp_path / "runs"
    specs = [{"id": "m1", "config": {"data": {"subset": 100}, "status": "mine"}, "loss": [1.0]},
             {"id": "m2", "config": {"data": {"subset": "all"}, "status": "theirs"}, "loss": [2.0]}]
    subprocess.run([sys.executable, str(SWEEP), json.dumps({"project": "p", "runs": specs})],
                   env=clean_env(NB_DIR=str(root)), check=True, timeout=120)
    assert [r["id"] for r in _ls_json(cli, root, "--where", "data.subset = 'all'")] == ["m2"]
    assert [r["id"] for r in _ls_json(cli, root, "--where", "data.subset = '100'")] == ["m1"]
    got = _ls_json(cli, root, "--where", "config.status = 'mine' and status = 'finished'", "-c", "config.status")
    assert got == [{"id": "m1", "config.status": "mine"}]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--where", "optim.lr <"], ["--where", "cannot parse"]),
        (["--where", "optim.lrr < 1"], ["--where", "unknown key 'optim.lrr'", "optim.lr"]),
        (["--where", "optim.name < 1"], ["--where", "cannot evaluate", "compare"]),
        (["--where", "optim.lr"], ["--where", "cannot evaluate"]),
        (["--where", " "], ["--where", "empty"]),
        (["--where", "status = finished"], ["--where", "unknown key 'finished'", "single quotes"]),
        (["--sort", "nosuch"], ["--sort", "unknown key 'nosuch'"]),
        (["--group", "optim.nme"], ["--group", "unknown key 'optim.nme'", "optim.name"]),
        (["--columns", "train/loss.mean"], ["--columns", "unknown key 'train/loss.mean'"]),
        (["--columns", ","], ["--columns", "no key"]),
    ],
)
def test_bad_queries_are_usage_errors(cli, sweep, args, words):
    root, _specs = sweep
    result = cli("ls", "--root", str(root), *args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    for w in words:
        assert w in result.stderr
    assert "Traceback" not in result.stderr


def _nb(args, **env):
    return subprocess.run(NB + args, env=clean_env(**env), capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "args",
    [
        ["--where", "optim.lr < 3e-4 and train/loss.min < 0.2", "--sort", "train/loss.min"],
        ["-w", "seed < 20", "-c", "optim.lr,status", "--desc", "--sort", "optim.lr"],
        ["--group", "optim.name", "-c", "train/loss.min", "--json"],
        ["--desc", "--json", "--name", "trial3"],
        ["--where", "optim.lr <"],
        ["--sort", "nosuch", "--json"],
    ],
)
def test_query_forms_same_on_the_fast_path_as_with_typer(sweep, args):
    root, _specs = sweep
    fast = _nb(["ls", *args, "--root", str(root)])
    typer = _nb(["ls", *args, "--root", str(root)], NB_DEBUG="1")
    assert (fast.returncode, fast.stdout, fast.stderr) == (typer.returncode, typer.stdout, typer.stderr)
    assert fast.returncode in (0, 2) and "Traceback" not in fast.stderr


def test_quote_keys():
    assert quote_keys("optim.lr < 3e-4 and train/loss.min<1") == '"optim.lr" < 3e-4 and "train/loss.min"<1'
    # quoted text, quoted keys, numbers, plain words and function calls stay as they are
    kept = "\"val/top-1\" > 0.5 and name = 'a.b/c' and lr < 1.5e-3 and x / y > 2 and lower(name) = 'x'"
    assert quote_keys(kept) == kept
    assert quote_keys("layer.0.weight = 1 and 'it''s.x' = a.b") == "\"layer.0.weight\" = 1 and 'it''s.x' = \"a.b\""
    # quoted and bare parts joined by dots are one key, as bare dotted words are
    assert quote_keys('"train/loss".last > 0.1') == '"train/loss.last" > 0.1'
    assert quote_keys('"val/top-1"."max" > 0.9 and optim."lr" < 1') == '"val/top-1.max" > 0.9 and "optim.lr" < 1'
    assert quote_keys('"a""b".c = 1 and x."y".z/w.min > 2') == '"a""b.c" = 1 and "x.y.z/w.min" > 2'
    assert quote_keys('lower("name") = \'a.b\' and "x" > 1') == 'lower("name") = \'a.b\' and "x" > 1'


def test_fast_argv_understands_the_query_options():
    from nbcli._ls import fast_argv

    argv = ["sweep", "-w", "x < 1", "-c", "a, b", "--columns=c", "--sort", "k", "--desc", "-g", "g", "--json"]
    assert fast_argv(argv) == {"project": "sweep", "name": None, "statuses": [], "root": None, "as_json": True,
                               "where_expr": "x < 1", "sort": "k", "group": "g", "columns": ["a", "b", "c"],
                               "desc": True, "argv": argv}
    for bad in (["--columns", ","], ["--sort", " "], ["--group", ""], ["--where"], ["-w", "-1 < x"]):
        assert fast_argv(bad) is None, bad  # Typer's to report (or to parse, for a value that starts with -)


def test_a_usage_error_on_the_fast_path_reads_each_log_once(sweep, monkeypatch, capsys):
    """A mistyped key is found only after every run's tags were read (runs without a
    summary: every event log); the Typer run that reports it reuses what was read."""
    from nbcli.app import _fast

    root, _specs = sweep
    seen: list[str] = []
    real = rq.tag_stats

    def spy(run_dir, meta=None):
        seen.append(run_dir)
        return real(run_dir, meta)

    monkeypatch.setattr(rq, "tag_stats", spy)
    with pytest.raises(SystemExit) as exit_:
        _fast(["ls", "--root", str(root), "--where", "optim.lrr < 1"])
    assert exit_.value.code == 2
    assert "unknown key 'optim.lrr'" in capsys.readouterr().err
    assert len(seen) == len(set(seen)) == N_RUNS


def test_values_from_data_are_escaped(cli, tmp_path):
    """Names, config values and keys from the runs never reach the terminal as controls
    or Rich markup, piped or on a terminal."""
    root = tmp_path / "runs"
    evil = "[bold red]x[/] \x1b[2J\u202e"
    specs = [{"id": "e1", "name": "[blink]n[b]", "config": {"note": evil, "k": {"[b]": 1}}, "loss": [1.0]}]
    subprocess.run([sys.executable, str(SWEEP), json.dumps({"project": "p", "runs": specs})],
                   env=clean_env(NB_DIR=str(root)), check=True, timeout=120)
    for env in ({}, {"FORCE_COLOR": "1", "COLUMNS": "200"}):
        result = cli("ls", "--root", str(root), "--where", "note is not null", "-c", "name,note,k,train/loss", env=env)
        assert result.exit_code == 0, result.stderr
        out = result.stdout
        assert "\x1b[2J" not in out and "\u202e" not in out
        assert "\\x1b[2J" in out and "\\u202e" in out and "[bold red]x[/]" in out and "[blink]n[b]" in out
        assert '{"[b]":1}' in out
        group = cli("ls", "--root", str(root), "--group", "note", "-c", "name", env=env)
        assert "\x1b[2J" not in group.stdout and "\\x1b[2J" in group.stdout and "[blink]n[b]" in group.stdout
