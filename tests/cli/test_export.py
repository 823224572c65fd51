"""nb export: formats, ranks, kinds, tag globs, hidden points, stdout, hive datasets."""

from __future__ import annotations

import io
import json
import math
import os
import resource
import signal
import subprocess
import sys

import polars as pl
import pytest
from cli_helpers import clean_env


def export(cli, runs, *args, run="ddp-00000001"):
    result = cli("export", run, "--root", str(runs), *args)
    assert result.exit_code == 0, result.stderr
    return result


def test_parquet_rank0_scalars(cli, runs, tmp_path):
    out = tmp_path / "s.parquet"
    result = export(cli, runs, "-o", str(out))
    assert result.stdout == "" and "wrote" in result.stderr and str(out) in result.stderr
    df = pl.read_parquet(out)
    assert df.columns == ["rank", "session", "step", "tag", "value", "wall_time", "active_time"]
    assert df.schema["rank"] == pl.Int32 and df.schema["step"] == pl.Int64 and df.schema["value"] == pl.Float64
    assert set(df["rank"]) == {0} and set(df["session"]) == {0, 1}
    loss = df.filter(pl.col("tag") == "train/loss").sort("step")
    assert loss["step"].to_list() == list(range(25)) + [5]  or len(loss) == 26
    assert df.filter(pl.col("step") >= 10)["session"].unique().to_list() == [1]  # hidden: left out


def test_default_file_name(cli, runs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    export(cli, runs)
    assert (tmp_path / "ddp-00000001-scalars.parquet").exists()
    export(cli, runs, "--kind", "timers", "--format", "csv")
    assert (tmp_path / "ddp-00000001-timers.csv").exists()


def test_all_ranks_timers(cli, runs, tmp_path):
    out = tmp_path / "t.parquet"
    export(cli, runs, "--all-ranks", "--kind", "timers", "-o", str(out))
    df = pl.read_parquet(out)
    assert df.group_by("rank").len().sort("rank")["len"].to_list() == [25, 25, 25]


def test_one_rank(cli, runs, tmp_path):
    out = tmp_path / "r2.csv"
    export(cli, runs, "--rank", "2", "-k", "timers", "-o", str(out))
    df = pl.read_csv(out)
    assert set(df["rank"]) == {2} and set(df["tag"]) == {"step"}


def test_a_rank_without_an_event_log_is_an_error(cli, runs, tmp_path):
    out = tmp_path / "r7.csv"
    result = cli("export", "ddp-00000001", "--root", str(runs), "--rank", "7", "-o", str(out))
    assert result.exit_code == 1 and not out.exists()
    assert "rank 7 has no event log in run ddp-00000001 (ranks with event logs: 0-2)" in result.stderr
    assert "--all-ranks" in result.stderr  # the hint


def test_csv_keeps_nan_and_inf(cli, runs, tmp_path):
    out = tmp_path / "s.csv"
    export(cli, runs, "-o", str(out), "--tag", "train/*")
    df = pl.read_csv(out)
    assert set(df["tag"]) == {"train/loss", "train/grad"}
    assert any(math.isnan(v) for v in df["value"]) and math.inf in df["value"].to_list()


def test_ndjson_keeps_nan_and_inf_as_strings(cli, runs, tmp_path):
    out = tmp_path / "s.ndjson"
    export(cli, runs, "-o", str(out), "--tag", "train/*")
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    values = [r["value"] for r in rows]
    assert "nan" in values and "inf" in values
    assert all(isinstance(v, float) for v in values if v not in ("nan", "inf", "-inf"))
    assert set(rows[0]) == {"rank", "session", "step", "tag", "value", "wall_time", "active_time"}


def test_include_hidden(cli, runs, tmp_path):
    out = tmp_path / "h.parquet"
    export(cli, runs, "--include-hidden", "-o", str(out), "--tag", "[[]bold red]x[[]/]")
    df = pl.read_parquet(out)
    assert set(df["tag"]) == {"[bold red]x[/]"}  # a glob matching the literal tag
    assert df["hidden"].sum() == 10 and len(df) == 35
    assert df.filter(pl.col("hidden"))["session"].unique().to_list() == [0]


def test_text_and_system(cli, runs, tmp_path):
    out = tmp_path / "text.parquet"
    export(cli, runs, "--kind", "text", "-o", str(out))
    assert pl.read_parquet(out)["text"].to_list() == ["hello \x1b[31mred\x1b[0m \u202eevil", "resumed"]
    out = tmp_path / "sys.parquet"
    export(cli, runs, "--kind", "system", "--all-ranks", "-o", str(out))
    df = pl.read_parquet(out)
    assert set(df["hostname"]) == {"node-a", "node-b"} and set(df["rank"]) == {0, 2}
    assert df["tag"].str.starts_with("system/").all()


def test_stdout(cli, runs):
    result = export(cli, runs, "-o", "-", "--format", "csv", "--tag", "train/loss")
    df = pl.read_csv(io.StringIO(result.stdout))
    assert set(df["tag"]) == {"train/loss"} and result.stderr == ""
    result = export(cli, runs, "-o", "-", "--tag", "train/loss")  # parquet bytes to a pipe
    assert pl.read_parquet(io.BytesIO(result.stdout_bytes)).height == len(df)


@pytest.mark.parametrize(
    "args",
    [
        ["--all-ranks", "--rank", "1"],
        ["-o", "out.dat"],
        ["--kind", "media"],
        ["--format", "xlsx"],
        ["--project", "vision"],
    ],
)
def test_usage_errors(cli, runs, tmp_path, args):
    result = cli("export", "ddp-00000001", "--root", str(runs), *args)
    assert result.exit_code == 2 and result.stdout == ""


def test_hive_dataset_of_a_root(cli, runs, tmp_path):
    out = tmp_path / "ds"
    result = cli("export", "--root", str(runs), "-o", str(out), "--kind", "timers")
    assert result.exit_code == 0, result.stderr
    assert (out / "project=vision" / "run=ddp-00000001" / "rank=2" / "part-0.parquet").exists()
    df = pl.scan_parquet(out, hive_partitioning=True,
                         hive_schema={"project": pl.String, "run": pl.String, "rank": pl.Int32}).collect()
    assert set(df["project"]) == {"vision", "nlp"}
    assert df.filter(pl.col("run") == "ddp-00000001").group_by("rank").len().sort("rank")["len"].to_list() == [
        25, 25, 25]
    assert "hive" in result.stderr


def test_hive_dataset_of_one_project(cli, runs, tmp_path):
    out = tmp_path / "ds"
    result = cli("export", "--root", str(runs), "-o", str(out), "--project", "nlp")
    assert result.exit_code == 0, result.stderr
    assert {p.name for p in out.iterdir()} == {"project=nlp"}


def test_hive_usage_errors(cli, runs, tmp_path):
    assert cli("export", "--root", str(runs)).exit_code == 2
    assert cli("export", "--root", str(runs), "-o", str(tmp_path), "--format", "csv").exit_code == 2
    assert cli("export", "--root", str(runs), "-o", str(tmp_path), "--rank", "1").exit_code == 2
    result = cli("export", "--root", str(tmp_path / "missing"), "-o", str(tmp_path / "ds"))
    assert result.exit_code == 1 and "does not exist" in result.stderr


def test_missing_output_folder_is_named_not_a_temp_file(cli, runs, tmp_path):
    missing = tmp_path / "no" / "such"
    result = cli("export", "ddp-00000001", "--root", str(runs), "-o", str(missing / "x.csv"))
    assert result.exit_code == 1
    assert str(missing) in result.stderr and ".tmp" not in result.stderr
    assert not missing.exists()


def test_an_output_that_is_a_folder_is_named_not_a_temp_file(cli, runs, tmp_path):
    (tmp_path / "isdir.csv").mkdir()
    result = cli("export", "ddp-00000001", "--root", str(runs), "-o", str(tmp_path / "isdir.csv"))
    assert result.exit_code == 1
    assert "isdir.csv is a folder" in result.stderr and ".tmp" not in result.stderr and "Errno" not in result.stderr


def test_a_dataset_holds_one_kind(cli, runs, tmp_path):
    """Timers written into a folder of scalars (same columns, another meaning) would
    mix silently in a scan: refused; the same kind again replaces the files."""
    out = tmp_path / "ds"
    assert cli("export", "--root", str(runs), "-o", str(out)).exit_code == 0
    part = out / "project=vision" / "run=ddp-00000001" / "rank=0" / "part-0.parquet"
    assert pl.read_parquet_metadata(part)["nb.kind"] == "scalars"
    before = part.read_bytes()
    result = cli("export", "--root", str(runs), "-o", str(out), "--kind", "timers")
    assert result.exit_code == 1
    assert "holds a dataset of scalars" in result.stderr and part.read_bytes() == before
    assert cli("export", "--root", str(runs), "-o", str(out), "--project", "vision").exit_code == 0


def _limited(max_bytes: int):
    """A preexec_fn: files of the child may not grow past ``max_bytes`` (a write past it
    fails with EFBIG, as on a full disk, instead of killing it with SIGXFSZ)."""
    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))
    return limit


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".ndjson"])
def test_a_failed_write_names_the_target_not_a_temp_file(runs, tmp_path, suffix):
    out = tmp_path / "out" / f"s{suffix}"
    out.parent.mkdir()
    p = subprocess.run([sys.executable, "-c", "from nbcli.app import main; main()", "export", "ddp-00000001",
                        "--root", str(runs), "-o", str(out)], env=clean_env(PYTHONDONTWRITEBYTECODE="1"),
                       capture_output=True, text=True, timeout=120, preexec_fn=_limited(16))
    assert p.returncode == 1
    assert f"error: cannot write {out}: File too large" in p.stderr
    assert ".tmp" not in p.stderr and "internal error" not in p.stderr and "Traceback" not in p.stderr
    assert list(out.parent.iterdir()) == []  # neither the target nor the temp file is left


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc (a folder where no file can be made)")
def test_a_folder_where_no_file_can_be_made_is_named_not_a_temp_file(cli, runs):
    result = cli("export", "ddp-00000001", "--root", str(runs), "-o", "/proc/nb-export-test.parquet")
    assert result.exit_code == 1
    assert "error: cannot write /proc/nb-export-test.parquet:" in result.stderr and ".tmp" not in result.stderr
