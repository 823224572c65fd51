"""export_tfevents: an nb run as TensorBoard event files, read back by TensorBoard's data
provider (scalars and timers) and EventAccumulator (text, images, histograms)."""

from __future__ import annotations

import io
import sys

import numpy as np
from fwkit import SCRIPTS, only_run
from PIL import Image
from tbkit import tensorboard_scalars
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import nblog as nb
from nblog.tensorboard import SummaryWriter, export_tfevents

sys.path.insert(0, str(SCRIPTS))
from tb_calls import calls  # noqa: E402

TIMER_DESCRIPTION = "nb timer: seconds of one occurrence"  # man nb-export: how a timer says it is one


def test_export_reads_back_in_tensorboard_as_nb_shows_it(tmp_path):
    with SummaryWriter(tmp_path / "logs" / "exp", root=tmp_path / "runs") as w:
        calls(w)
        for step in range(10):
            w.add_scalar("curve", float(step), step)
            with w.run.timer("time/step", step=step):
                pass
    with SummaryWriter(tmp_path / "logs" / "exp", purge_step=6, root=tmp_path / "runs") as w:
        for step in range(6, 12):
            w.add_scalar("curve", 100.0 + step, step)
    folder = only_run(tmp_path / "runs")
    written = export_tfevents(folder, tmp_path / "tb")
    assert written == [str(tmp_path / "tb" / "rank_0")]
    r = nb.RunReader(folder)
    tb = tensorboard_scalars(tmp_path / "tb")["rank_0"]  # what `tensorboard --logdir` shows
    scalars = r.scalars()
    assert sorted(tb) == sorted(set(scalars["tag"].to_list()) | {"time/step"})
    for tag in tb:
        frame = scalars.filter(tag=tag) if tag != "time/step" else r.timers()
        nb_points = frame.select("step", "value", "wall_time").rows()
        assert [p[:2] for p in tb[tag].points] == [p[:2] for p in nb_points], tag  # float64: exact
        assert np.allclose([p[2] for p in tb[tag].points], [p[2] for p in nb_points])
        assert tb[tag].description == (TIMER_DESCRIPTION if tag == "time/step" else ""), tag
    assert [v for _s, v, _w in tb["curve"].points] == [float(x) for x in range(6)] + [100.0 + x for x in range(6, 12)]
    assert [v for _s, v, _w in tb["train/loss"].points] == [1.0 / (step + 1) for step in range(5)]  # not float32
    ea = EventAccumulator(written[0], size_guidance={"scalars": 0, "images": 0, "histograms": 0, "tensors": 0})
    ea.Reload()
    (text,) = ea.Tensors("notes/text_summary")
    assert text.tensor_proto.string_val[0].decode() == "hello tb" and text.step == 2
    for rec in r.media(kind="image").iter_rows(named=True):
        (img,) = ea.Images(rec["tag"])
        assert img.step == rec["step"]
        assert np.array_equal(np.asarray(Image.open(io.BytesIO(img.encoded_image_string))), np.asarray(r.image(rec)))
    (h,) = ea.Histograms("weights")
    nb_h = r.histograms("weights")
    assert h.step == 3 and h.histogram_value.num == nb_h["num"][0]
    assert list(h.histogram_value.bucket) == [float(c) for c in nb_h["count"].to_list()]
