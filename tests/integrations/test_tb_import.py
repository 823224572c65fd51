"""The TensorBoard bridge with the real writer and reader: event files written by
torch.utils.tensorboard, ``nb import tensorboard``, and ``nb export --format tfevents``,
compared with TensorBoard's own EventAccumulator and data provider; and nb's own export of
a torchrun job brought back whole by ``nb import tensorboard``."""

from __future__ import annotations

import asyncio
import io
import json
import shutil
import subprocess

import fwkit
import numpy as np
import pytest
from fwkit import SCRIPTS, VENV_BIN, clean_env
from PIL import Image
from polars.testing import assert_frame_equal
from tbkit import tensorboard_scalars
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch.utils.tensorboard import SummaryWriter

import nblog as nb

ALL = {"scalars": 0, "images": 0, "histograms": 0, "tensors": 0}
RNG = np.random.default_rng(7)
IMAGE = (RNG.random((3, 8, 6)) * 255).astype(np.uint8)
WEIGHTS = RNG.standard_normal(1000)


def nb_cli(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([str(VENV_BIN / "nb"), *args], cwd=cwd, env=clean_env(), capture_output=True,
                          text=True, timeout=120)


def write_tb(log_dir) -> None:
    """Two writers on one folder: steps 0-9, then a restart with purge_step=6 (6-11)."""
    with SummaryWriter(log_dir) as w:
        for step in range(10):
            w.add_scalar("loss", 1.0 / (step + 1), step)
            w.add_scalar("acc/top1", step * 0.1, step)
        w.add_text("notes", "hello *tb*", 3)
        w.add_image("img", IMAGE, 4)
        w.add_histogram("weights", WEIGHTS, 5)
    with SummaryWriter(log_dir, purge_step=6) as w:
        for step in range(6, 12):
            w.add_scalar("loss", 2.0 / (step + 1), step)


def accumulator(folder) -> EventAccumulator:
    ea = EventAccumulator(str(folder), size_guidance=ALL)
    ea.Reload()
    return ea


def assert_scalars_equal(ea: EventAccumulator, reader, tags=None) -> None:
    """Every scalar of ``ea`` in ``reader`` at the same step, value and wall time (1 ms)."""
    frame = reader.scalars()
    tags = tags or ea.Tags()["scalars"]
    assert sorted(tags) == sorted(set(frame["tag"].to_list()))
    for tag in tags:
        tb = [(e.step, e.value, e.wall_time) for e in ea.Scalars(tag)]
        got = frame.filter(tag=tag).sort("step").select("step", "value", "wall_time").rows()
        assert [(s, v) for s, v, _ in tb] == [(s, v) for s, v, _ in got], tag
        assert max(abs(a[2] - b[2]) for a, b in zip(tb, got, strict=True)) < 1e-3, tag


def imported_run(root) -> nb.RunReader:
    (run_json,) = root.glob("tensorboard/*/run.json")
    return nb.RunReader(run_json.parent)


def test_import_equals_event_accumulator(tmp_path):
    write_tb(tmp_path / "tb" / "exp1")
    proc = nb_cli("import", "tensorboard", "tb", "--root", "runs", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "exp1" in proc.stderr and "2 sessions" in proc.stderr
    r = imported_run(tmp_path / "runs")
    ea = accumulator(tmp_path / "tb" / "exp1")
    assert_scalars_equal(ea, r)  # TensorBoard's purge of steps >= 6 is nb's hiding
    assert r.meta["name"] == "exp1" and r.config["tensorboard_logdir"] == str(tmp_path / "tb" / "exp1")
    assert [s["first_step"] for s in r.sessions()] == [0, 6]
    assert r.scalars(include_hidden=True).filter(hidden=True).height == 8  # loss and acc/top1 at 6..9

    (text,) = r.text().rows(named=True)
    (tb_text,) = ea.Tensors("notes/text_summary")
    assert (text["tag"], text["step"], text["text"]) == ("notes", 3, tb_text.tensor_proto.string_val[0].decode())
    assert abs(text["wall_time"] - tb_text.wall_time) < 1e-3
    (img,) = r.media(kind="image").rows(named=True)
    (tb_img,) = ea.Images("img")
    assert img["step"] == 4 and r.media_bytes(img) == tb_img.encoded_image_string
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(r.media_bytes(img)))), IMAGE.transpose(1, 2, 0))
    hist = r.histograms("weights")
    (tb_hist,) = ea.Histograms("weights")
    h = tb_hist.histogram_value
    assert hist["step"][0] == 5 and hist["num"][0] == h.num == 1000
    assert hist["count"].sum() == 1000 and hist["sum"][0] == pytest.approx(WEIGHTS.sum())
    assert hist["bin_left"][0] == pytest.approx(WEIGHTS.min()) and hist["bin_right"][-1] == pytest.approx(WEIGHTS.max())

    show = nb_cli("show", r.id, "--root", "runs", "--json", cwd=tmp_path)
    assert show.returncode == 0, show.stderr
    assert len(json.loads(show.stdout)["sessions"]) == 2


def test_import_reads_in_the_tui(tmp_path):
    from textual.widgets import DataTable

    from nbcli.tui.app import NbTui
    from nbcli.tui.screens.run import RunScreen

    write_tb(tmp_path / "tb" / "exp1")
    assert nb_cli("import", "tensorboard", "tb", "--root", "runs", cwd=tmp_path).returncode == 0

    async def drive() -> None:
        app = NbTui(root=str(tmp_path / "runs"), poll_s=0)
        async with app.run_test(size=(100, 30)) as pilot:
            for _ in range(50):
                await pilot.pause(0.05)
                if app.screen.query(DataTable) and app.screen.query_one(DataTable).row_count:
                    break
            assert app.screen.query_one(DataTable).row_count == 1
            await pilot.press("enter")
            for _ in range(50):
                await pilot.pause(0.05)
                if isinstance(app.screen, RunScreen):
                    break
            assert isinstance(app.screen, RunScreen)
            await pilot.press("q")

    asyncio.run(drive())


def _one_file(folder):
    (path,) = [p for p in folder.iterdir() if "tfevents" in p.name]
    return path


@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
def test_damaged_file_converts_up_to_the_damage_with_one_warning(tmp_path, damage):
    folder = tmp_path / "tb" / "run"
    with SummaryWriter(folder) as w:
        for step in range(50):
            w.add_scalar("loss", float(step), step)
    path = _one_file(folder)
    data = path.read_bytes()
    cut = len(data) * 2 // 3
    if damage == "truncated":
        path.write_bytes(data[:cut])
    else:
        path.write_bytes(data[:cut] + bytes([data[cut] ^ 0xFF]) + data[cut + 1 :])
    proc = nb_cli("import", "tensorboard", "tb", "--root", "runs", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("truncated or corrupt") == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    ea = accumulator(folder)  # TensorBoard itself reads up to the damage
    steps = [e.step for e in ea.Scalars("loss")]
    assert 10 < len(steps) < 50 and steps == list(range(len(steps)))
    assert_scalars_equal(ea, imported_run(tmp_path / "runs"))


def test_reimport_is_refused_and_update_adds_only_new_points(tmp_path):
    folder = tmp_path / "tb" / "exp"
    with SummaryWriter(folder) as w:
        for step in range(5):
            w.add_scalar("loss", float(step), step)
    assert nb_cli("import", "tensorboard", "tb", "--root", "runs", cwd=tmp_path).returncode == 0
    again = nb_cli("import", "tensorboard", "tb", "--root", "runs", cwd=tmp_path)
    assert again.returncode == 1 and "already imported" in again.stderr and "--update" in again.stderr
    assert len(list((tmp_path / "runs").glob("tensorboard/*"))) == 1
    assert imported_run(tmp_path / "runs").scalars().height == 5

    same = nb_cli("import", "tensorboard", "tb", "--root", "runs", "--update", cwd=tmp_path)
    assert same.returncode == 0 and "up to date" in same.stderr
    assert len(imported_run(tmp_path / "runs").sessions()) == 1

    with SummaryWriter(folder) as w:  # the job went on: a new file, steps 5..7
        for step in range(5, 8):
            w.add_scalar("loss", float(step), step)
    upd = nb_cli("import", "tensorboard", "tb", "--root", "runs", "--update", cwd=tmp_path)
    assert upd.returncode == 0, upd.stderr
    r = imported_run(tmp_path / "runs")
    sessions = r.sessions()
    assert len(sessions) == 2 and sessions[1]["first_step"] == 5 and sessions[1]["points"] == 3
    assert_scalars_equal(accumulator(folder), r)


def test_export_tfevents_reads_back_equal(tmp_path):
    write_tb(tmp_path / "tb" / "exp1")
    assert nb_cli("import", "tensorboard", "tb", "--root", "runs", cwd=tmp_path).returncode == 0
    r = imported_run(tmp_path / "runs")
    proc = nb_cli("export", r.id, "--root", "runs", "--format", "tfevents", "-o", "out", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    back = accumulator(tmp_path / "out" / "rank_0")
    original = accumulator(tmp_path / "tb" / "exp1")
    shown_back = tensorboard_scalars(tmp_path / "out")["rank_0"]  # float64 tensors: TensorBoard's data provider
    assert sorted(shown_back) == sorted(original.Tags()["scalars"])
    for tag in original.Tags()["scalars"]:  # the purged curve, the same values
        points = shown_back[tag].points
        assert [(e.step, e.value) for e in original.Scalars(tag)] == [p[:2] for p in points], tag
        assert max(abs(e.wall_time - p[2]) for e, p in zip(original.Scalars(tag), points, strict=True)) < 1e-3
    assert back.Images("img")[0].encoded_image_string == original.Images("img")[0].encoded_image_string
    assert back.Histograms("weights")[0].histogram_value.num == 1000


def test_cli_bad_input_exits_with_a_message(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_text("x")
    cases = [
        (("import", "tensorboard"), 2, "LOGDIR"),
        (("import", "tensorboard", "missing"), 2, "does not exist"),
        (("import", "tensorboard", "file"), 2, "not a folder"),
        (("import", "tensorboard", "empty", "--root", "runs"), 1, "no TensorBoard event files"),
        (("import", "tensorboard", "empty", "--project", "a/b"), 2, "--project"),
        (("export", "x", "--format", "tfevents"), 2, "-o DIR"),
        (("export", "x", "--format", "tfevents", "-o", "o", "--tag", "a"), 2, "--tag"),
    ]
    for args, code, words in cases:
        proc = nb_cli(*args, cwd=tmp_path)
        assert proc.returncode == code, (args, proc.stderr)
        assert words in proc.stderr and "Traceback" not in proc.stderr, (args, proc.stderr)
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").rglob("run.json"))
    shutil.rmtree(tmp_path / "empty")


def test_a_folder_of_summaries_nb_cannot_hold_makes_no_run(tmp_path):
    with SummaryWriter(tmp_path / "tb" / "sound") as w:
        w.add_audio("clip", np.zeros((1, 800), np.float32), 0, sample_rate=8000)
    proc = nb_cli("import", "tensorboard", "tb", "--root", "runs", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "nothing nb can hold" in proc.stderr and "audio x1" in proc.stderr
    assert not list((tmp_path / "runs").rglob("run.json"))


def test_update_of_a_growing_file_whose_metadata_came_first(tmp_path):
    """TensorFlow 2 writes a tag's plugin metadata with its first record only: records
    appended to the same file later are still known as scalars by --update."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.plugins.scalar import metadata
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    from tensorboard.util import tensor_util

    def scalar(step: int, first: bool):
        value = summary_pb2.Summary.Value(tag="loss", tensor=tensor_util.make_tensor_proto(float(step)))
        if first:
            value.metadata.CopyFrom(metadata.create_summary_metadata(display_name="loss", description=""))
        return event_pb2.Event(wall_time=1.7e9 + step, step=step, summary=summary_pb2.Summary(value=[value]))

    writer = EventFileWriter(str(tmp_path / "tb" / "tf2"))
    for step in range(3):
        writer.add_event(scalar(step, step == 0))
    writer.flush()
    assert nb_cli("import", "tensorboard", "tb", "--root", "runs", cwd=tmp_path).returncode == 0
    for step in range(3, 5):
        writer.add_event(scalar(step, False))
    writer.close()
    upd = nb_cli("import", "tensorboard", "tb", "--root", "runs", "--update", cwd=tmp_path)
    assert upd.returncode == 0, upd.stderr
    frame = imported_run(tmp_path / "runs").scalars()
    assert frame["step"].to_list() == [0, 1, 2, 3, 4] and frame["value"].to_list() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert frame["wall_time"].to_list() == pytest.approx([1.7e9 + s for s in range(5)], abs=1e-3)


POINT_COLUMNS = ["session", "step", "tag", "value", "wall_time"]


def test_nb_export_of_a_torchrun_job_comes_back_as_one_run(tmp_path):
    """A real 2-rank torchrun job, resumed once from an earlier step (session 1 hides
    session 0's steps 8-11 on both ranks): rank 0 logs scalars (float64 values, NaN, a
    scalar named like a timer) and text, every rank its timers. Exported as event files
    and imported again, it is one run with the same ranks, sessions, scalars, timers and
    text, point for point and bit for bit."""
    script = SCRIPTS / "tb_roundtrip_train.py"
    rid = "ddp-rt-0a1b2c3d"  # every rank finds the run by it (a plain torchrun launch shares no job id)
    env = clean_env(NB_DIR=str(tmp_path / "runs"), NB_RUN_ID=rid, NB_RESUME="auto")
    fwkit.run(fwkit.torchrun(script, "0", "12"), tmp_path, env)
    fwkit.run(fwkit.torchrun(script, "8", "15"), tmp_path, env)
    (run_json,) = (tmp_path / "runs").glob("*/*/run.json")
    orig = nb.RunReader(run_json.parent)
    assert orig.ranks() == [0, 1] and [s["first_step"] for s in orig.sessions(1)] == [0, 8]
    assert orig.sessions(1)[0]["hidden_points"] > 0 and orig.timers(rank=1).height > 0

    exported = nb_cli("export", rid, "--root", "runs", "--format", "tfevents", "-o", "tb_out", cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    imported = nb_cli("import", "tensorboard", "tb_out", "--root", "back", cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    assert f"nb export of rt-proj/{rid}: 2 ranks, 2 sessions" in imported.stderr

    listed = nb_cli("ls", "--root", "back", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)  # one run, not one per rank
    assert (row["project"], row["id"], row["name"], row["ranks"], row["world_size"], row["sessions"]) == (
        "rt-proj", rid, "ddp-rt", 2, 2, 2)
    back = nb.RunReader(row["path"])
    assert back.ranks() == orig.ranks() and back.config == orig.config == {"lr": 0.1, "layers": [2, 3]}
    for rank in orig.ranks():
        assert [(s["session"], s["first_step"], s["host"]) for s in back.sessions(rank)] == [
            (s["session"], s["first_step"], s["host"]) for s in orig.sessions(rank)]
        assert sum(s["hidden_points"] for s in back.sessions(rank)) == 0  # the export held visible points only
        for kind in ("scalars", "timers"):
            a, b = getattr(orig, kind)(rank=rank), getattr(back, kind)(rank=rank)
            assert_frame_equal(b.select(POINT_COLUMNS), a.select(POINT_COLUMNS), check_exact=True)
        assert back.tags(rank, "timer") == orig.tags(rank, "timer") == ["clash", "time/step"]
    assert back.scalars(rank=1).height == 0 and back.scalars().filter(tag="train/grad")["value"].is_nan().all()
    assert back.tags(0, "scalar") == ["clash", "lr", "train/grad", "train/loss"]
    assert_frame_equal(back.text(), orig.text(), check_exact=True)
    assert_frame_equal(back.timer_stats(), orig.timer_stats(), check_exact=True)

    shown = tensorboard_scalars(tmp_path / "tb_out")  # and TensorBoard shows every rank's timers
    assert [v for _s, v, _w in shown["rank_1"]["time/step"].points] == orig.timers("time/step", rank=1)["value"].to_list()
    assert shown["rank_1"]["time/step"].description == "nb timer: seconds of one occurrence"
    assert [v for _s, v, _w in shown["rank_0"]["train/loss"].points] == orig.scalars("train/loss")["value"].to_list()

    again = nb_cli("import", "tensorboard", "tb_out", "--root", "back", cwd=tmp_path)
    assert again.returncode == 1 and "already imported" in again.stderr
    beside = nb_cli("import", "tensorboard", "tb_out", "--root", "runs", cwd=tmp_path)  # the original is there
    assert beside.returncode == 0, beside.stderr
    ids = sorted(p.parent.name for p in (tmp_path / "runs").glob("rt-proj/*/run.json"))
    assert len(ids) == 2 and rid in ids  # a derived id beside the original, which is left as it was
    assert nb.RunReader(run_json.parent).sessions(0)[0]["hidden_points"] == orig.sessions(0)[0]["hidden_points"]
    twice = nb_cli("export", rid, "--root", "runs", "--format", "tfevents", "-o", "tb_out", cwd=tmp_path)
    assert twice.returncode == 1 and "holds TensorBoard event files already" in twice.stderr
    assert "Traceback" not in twice.stderr
    assert len(list((tmp_path / "tb_out" / "rank_0").iterdir())) == 1


def test_rank_folders_of_another_writer_stay_one_run_each(tmp_path):
    """torch's SummaryWriter, one per rank (torchtitan's layout): no nb marks, so each
    folder is a run of its own in project tensorboard, as before."""
    for rank in range(2):
        with SummaryWriter(tmp_path / "tb" / "exp" / f"rank_{rank}") as w:
            for step in range(3):
                w.add_scalar("time/step", 0.5 + rank, step)
    proc = nb_cli("import", "tensorboard", "tb", "--root", "runs", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    runs = sorted((tmp_path / "runs").glob("tensorboard/*/run.json"))
    names = sorted(nb.RunReader(p.parent).meta["name"] for p in runs)
    assert names == ["exp.rank_0", "exp.rank_1"]
    for p in runs:
        r = nb.RunReader(p.parent)
        assert r.ranks() == [0] and r.tags(0, "scalar") == ["time/step"] and r.timers().height == 0


def test_sessions_whose_steps_went_back_are_merged_so_nothing_exported_is_hidden(tmp_path):
    """Session 1 logs step 10 first, then 3 and 4; session 2 starts at 5. nb hides
    session 0's steps from 5 on and session 1's step 10. Exported, session 1 begins at
    step 3, which as its first step would hide session 0's 3 and 4: the import keeps
    every exported point visible (the sessions become one) and says so."""
    root = tmp_path / "runs"
    for steps in ([*range(10)], [10, 3, 4], [5, 6]):
        with nb.init("back", run_id="went-back-00000001", resume="auto", root=root, system=False) as run:
            for step in steps:
                run.add_scalar("loss", float(step), step=step)
    orig = nb.RunReader(root / "back" / "went-back-00000001")
    assert orig.scalars()["step"].to_list() == [0, 1, 2, 3, 4, 3, 4, 5, 6]
    assert nb_cli("export", "went-back-00000001", "--root", "runs", "--format", "tfevents", "-o", "out",
                  cwd=tmp_path).returncode == 0
    proc = nb_cli("import", "tensorboard", "out", "--root", "again", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "sessions are imported as one" in proc.stderr
    back = nb.RunReader(tmp_path / "again" / "back" / "went-back-00000001")
    assert_frame_equal(back.scalars().select("step", "tag", "value"), orig.scalars().select("step", "tag", "value"),
                       check_exact=True)
    # one session's clock now: each wall time to the millisecond nb stores
    assert (back.scalars()["wall_time"] - orig.scalars()["wall_time"]).abs().max() <= 1e-3
    assert [s["session"] for s in back.sessions()] == [0]
