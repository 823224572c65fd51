"""nb export streams (issue 18, 100M-point runs): the frame is decoded and written piece
by piece, and the file is the one the whole frame gave (multi-rank, two sessions with
hidden steps, NaN and inf)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import polars as pl
import pytest
from cli_helpers import clean_env
from polars.testing import assert_frame_equal

import nblog.reader._runs.export as export_mod
from nblog.reader import RunReader, read_frames, write_frames
from nblog.reader.lowlevel import read_frame, write_frame

CASES = [  # (kind, read_frame keywords): every rank, one rank, hidden points, a tag glob
    ("scalars", {}),
    ("scalars", {"include_hidden": True}),
    ("scalars", {"tags": "train/*"}),
    ("timers", {"all_ranks": True}),
    ("timers", {"all_ranks": True, "include_hidden": True}),
    ("timers", {"rank": 2}),
    ("text", {"all_ranks": True}),
    ("system", {"all_ranks": True}),
]


@pytest.fixture(scope="module")
def reader(runs) -> RunReader:
    return RunReader(runs / "vision" / "ddp-00000001")


@pytest.mark.parametrize(("kind", "kw"), CASES)
def test_the_pieces_are_the_frame_in_order(reader, kind, kw):
    whole = read_frame(reader, kind, **kw)
    pieces = list(read_frames(reader, kind, rows=4, **kw))
    assert len(whole) > 0
    if kind in ("scalars", "timers"):
        assert len(pieces) > 1 and all(len(p) <= 4 + 50 for p in pieces)  # a piece: whole payloads, ~4 rows
    assert_frame_equal(pl.concat(pieces), whole)


def test_no_rows_is_one_empty_piece_with_the_columns(reader):
    whole = read_frame(reader, "scalars", tags="no/such/*")
    pieces = list(read_frames(reader, "scalars", tags="no/such/*", rows=4))
    assert len(pieces) == 1 and len(whole) == 0
    assert_frame_equal(pieces[0], whole)


@pytest.mark.parametrize("fmt", ["parquet", "csv", "ndjson"])
@pytest.mark.parametrize(("kind", "kw"), CASES[:5])
def test_a_streamed_file_is_the_whole_frames_file(reader, tmp_path, fmt, kind, kw):
    one, streamed = tmp_path / f"one.{fmt}", tmp_path / f"streamed.{fmt}"
    whole = read_frame(reader, kind, **kw)
    write_frame(whole, one, fmt)
    rows, ranks = write_frames(read_frames(reader, kind, rows=3, **kw), streamed, fmt)
    assert (rows, ranks) == (len(whole), whole["rank"].n_unique())
    if fmt == "parquet":  # the same rows; the row groups may differ
        assert_frame_equal(pl.read_parquet(streamed), pl.read_parquet(one))
    else:  # NaN/inf in some pieces only: each line still as the whole frame writes it
        assert streamed.read_bytes() == one.read_bytes()


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".ndjson"])
def test_nb_export_writes_the_whole_frames_file(cli, runs, reader, tmp_path, monkeypatch, suffix):
    monkeypatch.setattr(export_mod, "STREAM_ROWS", 5)  # many pieces
    out, one = tmp_path / f"out{suffix}", tmp_path / f"one{suffix}"
    result = cli("export", "ddp-00000001", "--root", str(runs), "--all-ranks", "-k", "timers",
                 "--include-hidden", "-o", str(out))
    assert result.exit_code == 0, result.stderr
    whole = read_frame(reader, "timers", all_ranks=True, include_hidden=True)
    assert f"wrote {len(whole)} rows (timers, 3 ranks)" in result.stderr
    write_frame(whole, one, suffix[1:])
    if suffix == ".parquet":
        assert_frame_equal(pl.read_parquet(out), pl.read_parquet(one))
    else:
        assert out.read_bytes() == one.read_bytes()


def test_nb_export_to_a_pipe_is_the_whole_frame(runs, reader, tmp_path):
    out = tmp_path / "piped.parquet"
    code = "from nbcli.app import main; main()"
    with open(out, "wb") as f:
        nb = subprocess.Popen([sys.executable, "-c", code, "export", "ddp-00000001", "--root", str(runs),
                               "--include-hidden", "-o", "-"], stdout=subprocess.PIPE, env=clean_env())
        cat = subprocess.run(["cat"], stdin=nb.stdout, stdout=f, timeout=120)
        assert nb.wait(timeout=120) == 0 and cat.returncode == 0
    assert_frame_equal(pl.read_parquet(out), read_frame(reader, "scalars", include_hidden=True))


@pytest.fixture(scope="module")
def long_run(tmp_path_factory):
    """A run of 200,000 scalar points in 40 frames, written by nblog in a real process."""
    root = tmp_path_factory.mktemp("long")
    script = textwrap.dedent(f"""
        import nblog
        run = nblog.init("long", root={str(root)!r}, run_id="long-00000001", system=False, console=False)
        for step in range(20_000):
            run.add_scalar({{f"m{{k}}": step * 0.5 + k for k in range(10)}}, step=step)
            if step % 500 == 499:
                run.flush()  # 40 frames of points: a piece is made of whole frames
        run.finish()
    """)
    subprocess.run([sys.executable, "-c", script], check=True, env=clean_env(), timeout=300)
    return root


def test_nb_export_decodes_the_frame_piece_by_piece(cli, long_run, tmp_path, monkeypatch):
    """The frame is made in pieces of about STREAM_ROWS rows (whole frames of points), each
    written before the next is made; the file holds every row, in order."""
    run = long_run / "long" / "long-00000001"
    frame = RunReader(run).scalars()
    assert len(frame) == 200_000
    made: list[int] = []
    plan_frame = RunReader._plan_frame

    def spy(self, names, plan, include_hidden):
        df = plan_frame(self, names, plan, include_hidden)
        made.append(len(df))
        return df

    monkeypatch.setattr(RunReader, "_plan_frame", spy)
    monkeypatch.setattr(export_mod, "STREAM_ROWS", 8192)
    out = tmp_path / "long.parquet"
    result = cli("export", str(run), "-o", str(out))
    assert result.exit_code == 0, result.stderr
    assert sum(made) == len(frame) and len(made) >= 10 and max(made) <= 8192 + 5000, made
    assert_frame_equal(pl.read_parquet(out), frame)


@pytest.mark.parametrize("kind", ["scalars", "timers", "text", "system"])
def test_a_hive_dataset_holds_each_ranks_frame(cli, runs, reader, tmp_path, monkeypatch, kind):
    monkeypatch.setattr(export_mod, "STREAM_ROWS", 3)  # many pieces a rank
    out = tmp_path / "ds"
    result = cli("export", "--root", str(runs), "-o", str(out), "--kind", kind, "--include-hidden")
    assert result.exit_code == 0, result.stderr
    whole = read_frame(reader, kind, all_ranks=True, include_hidden=True)
    ranks = sorted(set(whole["rank"]))
    run = out / "project=vision" / "run=ddp-00000001"
    assert sorted(int(p.name.split("=")[1]) for p in run.iterdir()) == ranks  # a file for each rank with rows
    for r in ranks:
        got = pl.read_parquet(run / f"rank={r}" / "part-0.parquet")
        assert_frame_equal(got, whole.filter(pl.col("rank") == r).drop("rank"))


def test_a_hive_export_decodes_rank_by_rank_piece_by_piece(cli, long_run, tmp_path, monkeypatch):
    made: list[int] = []
    plan_frame = RunReader._plan_frame

    def spy(self, names, plan, include_hidden):
        df = plan_frame(self, names, plan, include_hidden)
        made.append(len(df))
        return df

    monkeypatch.setattr(RunReader, "_plan_frame", spy)
    monkeypatch.setattr(export_mod, "STREAM_ROWS", 8192)
    out = tmp_path / "ds"
    result = cli("export", "--root", str(long_run), "-o", str(out))
    assert result.exit_code == 0, result.stderr
    assert sum(made) == 200_000 and len(made) >= 10 and max(made) <= 8192 + 5000, made
    got = pl.read_parquet(out / "project=long" / "run=long-00000001" / "rank=0" / "part-0.parquet")
    assert_frame_equal(got, RunReader(long_run / "long" / "long-00000001").scalars().drop("rank"))


@pytest.mark.parametrize(("env", "advised"), [({}, "False"), ({"NUMPY_MADVISE_HUGEPAGE": "1"}, "True")])
def test_nb_export_asks_numpy_for_no_huge_pages(runs, tmp_path, env, advised):
    """Huge-page advice on each fresh piece made a streamed export slower (compaction at
    each fault); the nb process turns it off unless the user chose."""
    code = textwrap.dedent("""
        import sys
        from nbcli.app import main
        try:
            main()
        except SystemExit as stop:
            assert not stop.code, stop.code
        try:
            from numpy._core.multiarray import _get_madvise_hugepage
        except ImportError:  # numpy 1.x
            from numpy.core.multiarray import _get_madvise_hugepage
        print(_get_madvise_hugepage())
    """)
    out = subprocess.run([sys.executable, "-c", code, "export", "ddp-00000001", "--root", str(runs), "-o",
                          str(tmp_path / "s.parquet")], capture_output=True, text=True, env=clean_env(**env),
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [advised]
