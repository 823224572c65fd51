"""nblog.tensorboard.SummaryWriter against torch.utils.tensorboard.SummaryWriter.

The same calls go to both; TensorBoard's side is read back with its own
EventAccumulator, nb's with RunReader, and the values must agree.
"""

from __future__ import annotations

import io
import logging
import sys
from pathlib import Path

import numpy as np
from fwkit import SCRIPTS, clean_env, only_run, run, torchrun
from PIL import Image
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import nblog as nb
from nblog.tensorboard import SummaryWriter, run_folder_of

sys.path.insert(0, str(SCRIPTS))
from tb_calls import calls  # noqa: E402


def accumulator(folder: Path) -> EventAccumulator:
    ea = EventAccumulator(str(folder), size_guidance={"scalars": 0, "images": 0, "histograms": 0, "tensors": 0})
    ea.Reload()
    return ea


def tb_scalars(folder: Path, tag: str) -> list[tuple[int, float]]:
    return [(e.step, e.value) for e in accumulator(folder).Scalars(tag)]


def nb_scalars(r, tag: str) -> list[tuple[int, float]]:
    s = r.scalars([tag])
    # TensorBoard stores float32: compare nb's float64 at that precision
    return [(st, float(np.float32(v))) for st, v in zip(s["step"].to_list(), s["value"].to_list(), strict=True)]


def tb_png(folder: Path, tag: str) -> np.ndarray:
    (event,) = accumulator(folder).Images(tag)
    return np.asarray(Image.open(io.BytesIO(event.encoded_image_string)))


def nb_png(r, tag: str) -> np.ndarray:
    (record,) = r.media(tag).to_dicts()
    return np.asarray(r.image(record))


def assert_same_as_tensorboard(tb_dir: Path, r) -> None:
    assert nb_scalars(r, "train/loss") == tb_scalars(tb_dir, "train/loss")
    for key in ("a", "b"):  # TensorBoard: one folder per key, tag main_tag; nb: main_tag/key
        assert nb_scalars(r, f"lr/{key}") == tb_scalars(tb_dir / f"lr_{key}", "lr")
    (text,) = accumulator(tb_dir).Tensors("notes/text_summary")
    assert r.text()["text"].to_list() == [text.tensor_proto.string_val[0].decode()]
    assert r.text()["step"].to_list() == [text.step]
    for tag in ("img/chw", "img/hwc"):
        assert np.array_equal(nb_png(r, tag), tb_png(tb_dir, tag))
    # float pixels: TensorBoard truncates x*255, nb rounds it
    diff = nb_png(r, "img/batch").astype(int) - tb_png(tb_dir, "img/batch").astype(int)
    assert diff.min() >= 0 and diff.max() <= 1
    (h,) = accumulator(tb_dir).Histograms("weights")
    hist = r.histograms("weights").row(0, named=True)
    assert (hist["step"], hist["num"]) == (h.step, h.histogram_value.num)
    assert np.isclose(hist["min"], h.histogram_value.min) and np.isclose(hist["max"], h.histogram_value.max)
    assert np.isclose(hist["sum"], h.histogram_value.sum)
    hparams_dirs = [p for p in tb_dir.iterdir() if p.is_dir() and not p.name.startswith("lr_")]
    assert r.config["hparams"] == {"lr": 0.1, "bs": 4}
    assert nb_scalars(r, "hp/acc") == [(r.scalars(["hp/acc"])["step"][0], tb_scalars(hparams_dirs[0], "hp/acc")[0][1])]


def test_same_calls_read_back_equal_to_tensorboards(tmp_path):
    from torch.utils.tensorboard import SummaryWriter as TbWriter

    with TbWriter(tmp_path / "tb" / "exp") as tb:
        calls(tb)
    with SummaryWriter(tmp_path / "logs" / "exp", root=tmp_path / "runs") as w:
        calls(w)
    folder = only_run(tmp_path / "runs")
    assert folder.parent.name == "tensorboard"
    r = nb.RunReader(folder)
    assert r.meta["name"] == "exp"
    assert_same_as_tensorboard(tmp_path / "tb" / "exp", r)


def test_one_writer_per_rank_under_torchrun_lands_in_one_run(tmp_path):
    script = SCRIPTS / "tb_calls.py"
    run(torchrun(script, "tb", "tb"), tmp_path, clean_env())
    run(torchrun(script, "nb", "logs", "runs"), tmp_path, clean_env(NB_SYSTEM="0"))
    folder = only_run(tmp_path / "runs")
    r = nb.RunReader(folder)
    assert r.meta["name"] == "logs" and r.meta["world_size"] == 2
    assert_same_as_tensorboard(tmp_path / "tb" / "rank_0", r)


def test_reopening_a_log_dir_with_purge_step_continues_its_run(tmp_path):
    with SummaryWriter(tmp_path / "logs" / "exp", root=tmp_path / "runs") as w:
        for step in range(10):
            w.add_scalar("loss", float(step), step)
    with SummaryWriter(tmp_path / "logs" / "exp", purge_step=6, root=tmp_path / "runs") as w:
        for step in range(6, 12):
            w.add_scalar("loss", 100.0 + step, step)
    r = nb.RunReader(only_run(tmp_path / "runs"))
    assert [s["session"] for s in r.sessions(0)] == [0, 1]
    s = r.scalars(["loss"])
    assert s["step"].to_list() == list(range(12))
    assert s["value"].to_list() == [float(x) for x in range(6)] + [100.0 + x for x in range(6, 12)]


def test_unsupported_calls_warn_once_are_counted_and_never_raise(tmp_path, caplog):
    with SummaryWriter(tmp_path / "logs" / "x", root=tmp_path / "runs") as w, caplog.at_level(logging.WARNING):
        for _ in range(3):
            w.add_graph(object(), None)
        w.add_embedding([[1.0]], metadata=["a"])
        w.add_scalar("ok", 1.0, 0)
    assert w.unsupported == {"add_graph": 3, "add_embedding": 1}
    assert sum("add_graph" in m for m in caplog.messages) == 1
    assert nb.RunReader(only_run(tmp_path / "runs")).scalars()["value"].to_list() == [1.0]


def test_rank_part_of_a_log_dir_is_removed(tmp_path):
    assert run_folder_of(tmp_path / "tb" / "rank_3") == str(tmp_path / "tb")
    assert run_folder_of(tmp_path / "tb" / "exp_rank7") == str(tmp_path / "tb" / "exp")
    assert run_folder_of(tmp_path / "tb" / "ranking") == str(tmp_path / "tb" / "ranking")
