"""Bad media never raises into training: one warning per (call site, tag), skipped,
counted as ``bad_media``; ``NB_STRICT=1`` raises ``StrictModeError`` instead. Ranks that
do not log write no media pack. ``import nblog`` imports neither numpy nor Pillow."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from _media_helpers import dropped, read_back

import nblog as nb

BAD = {
    "image 4-d": ("add_image", (np.zeros((2, 3, 4, 4), np.uint8),), {}),
    "image 1-d": ("add_image", (np.zeros(10, np.uint8),), {}),
    "image 2 channels": ("add_image", (np.zeros((5, 6, 2), np.uint8),), {}),
    "image no channel axis": ("add_image", (np.zeros((5, 6, 7), np.uint8),), {}),
    "image empty": ("add_image", (np.zeros((0, 5), np.uint8),), {}),
    "image int64": ("add_image", (np.zeros((5, 5), np.int64),), {}),
    "image complex": ("add_image", (np.zeros((5, 5), complex),), {}),
    "image strings": ("add_image", (np.array([["a"]]),), {}),
    "image NaN": ("add_image", (np.full((5, 5), np.nan),), {}),
    "image inf tensor": ("add_image", (torch.full((3, 5, 5), float("inf")),), {}),
    "image None": ("add_image", (None,), {}),
    "image object": ("add_image", (object(),), {}),
    "image text bytes": ("add_image", (b"GIF89a....",), {}),
    "image PNG without IHDR": ("add_image", (b"\x89PNG\r\n\x1a\n" + b"\0" * 30,), {}),
    "image bad dataformats": ("add_image", (np.zeros((5, 5, 3), np.uint8),), {"dataformats": "HWX"}),
    "image dataformats too short": ("add_image", (np.zeros((5, 5, 3), np.uint8),), {"dataformats": "HW"}),
    "image dataformats not str": ("add_image", (np.zeros((5, 5), np.uint8),), {"dataformats": 3}),
    "image caption not str": ("add_image", (np.zeros((5, 5), np.uint8),), {"caption": 3}),
    "images 2-d": ("add_images", (np.zeros((5, 5), np.uint8),), {}),
    "images empty list": ("add_images", ([],), {}),
    "images mixed shapes": ("add_images", ([np.zeros((4, 4)), np.zeros((5, 5))],), {}),
    "histogram empty": ("add_histogram", (np.array([]),), {}),
    "histogram strings": ("add_histogram", (["a", "b"],), {}),
    "histogram complex": ("add_histogram", (np.ones(3, complex),), {}),
    "histogram complex tensor": ("add_histogram", (torch.ones(3, dtype=torch.complex64),), {}),
    "histogram ragged": ("add_histogram", ([[1, 2], [3]],), {}),
    "histogram bins 0": ("add_histogram", ([1.0, 2.0],), {"bins": 0}),
    "histogram bins bool": ("add_histogram", ([1.0, 2.0],), {"bins": True}),
    "histogram bins unknown rule": ("add_histogram", ([1.0, 2.0],), {"bins": "tensorflow"}),
    "histogram edges decreasing": ("add_histogram", ([1.0, 2.0],), {"bins": [3.0, 1.0]}),
    "histogram edges NaN": ("add_histogram", ([1.0, 2.0],), {"bins": [0.0, float("nan")]}),
    "audio 3-d": ("add_audio", (np.zeros((1, 2, 3)),), {"sample_rate": 8000}),
    "audio (L, C)": ("add_audio", (np.zeros((1000, 2)),), {"sample_rate": 8000}),
    "audio int32": ("add_audio", (np.zeros(10, np.int32),), {"sample_rate": 8000}),
    "audio NaN": ("add_audio", (np.array([0.0, np.nan]),), {"sample_rate": 8000}),
    "audio empty": ("add_audio", (np.zeros(0),), {"sample_rate": 8000}),
    "audio rate 0": ("add_audio", (np.zeros(10),), {"sample_rate": 0}),
    "audio rate float": ("add_audio", (np.zeros(10),), {"sample_rate": 8000.5}),
    "figure not a figure": ("add_figure", (np.zeros((5, 5)),), {}),
    "figure empty list": ("add_figure", ([],), {}),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_media_is_skipped_warned_and_counted(make_run, caplog, name):
    method, args, kwargs = BAD[name]
    caplog.set_level(logging.WARNING, "nblog")
    run = make_run()
    for _ in range(3):  # warned once per call site and tag
        getattr(run, method)("bad", *args, step=1, **kwargs)
    run.add_image("good", np.zeros((4, 4), np.uint8), step=1)
    r = read_back(run)
    assert r.media()["tag"].to_list() == ["good"]
    assert dropped(run) == {"bad_media": 3}
    warnings = [rec for rec in caplog.records if "the point is skipped" in rec.getMessage()]
    assert len(warnings) == 1 and "'bad'" in warnings[0].getMessage()


@pytest.mark.parametrize("name", list(BAD))
def test_bad_media_raises_with_nb_strict(make_run, name):
    method, args, kwargs = BAD[name]
    run = make_run(env={"NB_STRICT": "1"})
    with pytest.raises(nb.StrictModeError):
        getattr(run, method)("bad", *args, step=1, **kwargs)


@pytest.mark.parametrize("tag", [None, "", "a\0b", 3, "x" * 1025])
def test_bad_tags_and_steps(make_run, tag):
    run = make_run()
    run.add_image(tag, np.zeros((4, 4), np.uint8), step=1)
    run.add_histogram(tag, [1.0], step=1)
    run.add_image("ok", np.zeros((4, 4), np.uint8), step=-1)
    run.add_audio("ok", np.zeros(4), step=1.5, sample_rate=10)
    r = read_back(run)
    assert r.media().height == 0
    assert dropped(run) == {"bad_tag": 2, "bad_step": 2}


def test_a_jpeg_pillow_cannot_read_is_dropped_in_the_writer(make_run, caplog):
    caplog.set_level(logging.WARNING, "nblog")
    run = make_run()
    run.add_image("jpeg", b"\xff\xd8\xff" + b"\0" * 20, step=1)  # caught when encoding
    run.add_image("ok", np.zeros((4, 4), np.uint8), step=2)
    r = read_back(run)
    assert r.media()["tag"].to_list() == ["ok"]
    assert dropped(run) == {"bad_media": 1}
    assert any("cannot encode" in rec.getMessage() for rec in caplog.records)


def test_a_symbolic_link_in_place_of_the_pack_is_never_followed(make_run, tmp_path, caplog):
    caplog.set_level(logging.WARNING, "nblog")
    run = make_run()
    target = tmp_path / "elsewhere"
    target.write_bytes(b"")
    os.symlink(target, os.path.join(run.dir, "media.r0.pack"))
    run.add_image("img", np.zeros((4, 4), np.uint8), step=1)
    run.add_scalar("loss", 1.0, step=1)
    r = read_back(run)
    assert target.read_bytes() == b""
    assert r.media().height == 0 and r.scalars()["value"].to_list() == [1.0]
    assert dropped(run) == {"write_error": 1}
    assert any("cannot write media" in rec.getMessage() for rec in caplog.records)


def test_a_file_that_is_not_a_pack_is_not_appended_to(make_run):
    run = make_run()
    path = os.path.join(run.dir, "media.r0.pack")
    with open(path, "wb") as f:
        f.write(b"something else entirely")
    run.add_image("img", np.zeros((4, 4), np.uint8), step=1)
    r = read_back(run)
    assert r.media().height == 0
    assert open(path, "rb").read() == b"something else entirely"


# -- ranks that do not log ----------------------------------------------------------------


def test_non_logging_ranks_write_no_pack(make_run):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rank0 = make_run(run_id="shared", env={"RANK": "0", "WORLD_SIZE": "2"})
    rank1 = make_run(run_id="shared", env={"RANK": "1", "WORLD_SIZE": "2", "NB_STRICT": "1"},
                     timing_all_ranks=True)
    with rank1.timer("t"):  # rank 1 has an event log of its own
        pass
    rank1.add_image("img", np.zeros((4, 4), np.uint8), step=0)
    rank1.add_images("imgs", np.zeros((2, 4, 4), np.uint8), step=0)
    rank1.add_histogram("h", [1.0], step=0)
    rank1.add_audio("a", np.zeros(4), step=0, sample_rate=10)
    rank1.add_image(None, "garbage", step=-5)  # a no-op: never checked, never raises
    fig = plt.figure()
    rank1.add_figure("fig", fig, step=0)
    assert plt.get_fignums() == []  # closed even here, so memory does not grow
    rank1.finish()
    rank0.add_image("img", np.zeros((4, 4), np.uint8), step=0)
    rank0.finish()
    names = sorted(os.listdir(rank0.dir))
    assert "media.r0.pack" in names and "media.r1.pack" not in names
    assert "events.r1.s0.log" in names
    r = nb.RunReader(rank0.dir)
    assert r.media(rank=1).height == 0 and r.media().height == 1


def test_after_finish_media_calls_do_nothing(make_run):
    run = make_run()
    run.finish()
    run.add_image("img", np.zeros((4, 4), np.uint8), step=0)
    run.add_histogram("h", [1.0], step=0)
    assert not os.path.exists(os.path.join(run.dir, "media.r0.pack"))


def test_disabled_mode_writes_nothing(root):
    run = nb.init("p", root=root, mode="disabled", _environ={})
    run.add_image("img", np.zeros((4, 4), np.uint8), step=0)
    run.add_histogram("h", [1.0], step=0)
    run.finish()
    assert not root.exists()


def test_import_nblog_imports_neither_numpy_nor_pil():
    code = (
        "import sys, nblog\n"
        "run = nblog.Run\n"
        "bad = [m for m in ('numpy', 'PIL', 'matplotlib', 'torch', 'polars') if m in sys.modules]\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert out.stdout.strip() == "[]"
