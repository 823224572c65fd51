"""add_image / add_images / add_figure: every accepted input form reads back as the
same pixels (PNG is lossless); encoded bytes come back byte for byte."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from _media_helpers import read_back
from PIL import Image

RNG = np.random.default_rng(7)


def pixels(r, tag, i=0):
    df = r.media(tag)
    return np.asarray(r.image(df.row(i, named=True)))


def u8(*shape):
    return RNG.integers(0, 256, size=shape, dtype=np.uint8)


def f01(*shape, dtype=np.float32):
    return RNG.random(shape).astype(dtype)


def expected_u8(a):
    """The documented float rule: rint(x * 255) clipped to 0-255."""
    return np.clip(np.rint(np.asarray(a, np.float64) * 255.0), 0, 255).astype(np.uint8)


CASES = {
    "numpy HWC uint8 RGB": (u8(20, 30, 3), None, lambda a: a),
    "numpy HWC uint8 RGBA": (u8(20, 30, 4), None, lambda a: a),
    "numpy HW uint8": (u8(20, 30), None, lambda a: a),
    "numpy HWC with 1 channel": (u8(20, 30, 1), None, lambda a: a[:, :, 0]),
    "numpy CHW uint8": (u8(3, 20, 30), None, lambda a: a.transpose(1, 2, 0)),
    "numpy CHW 1 channel": (u8(1, 20, 30), None, lambda a: a[0]),
    "numpy HWC float32": (f01(20, 30, 3), None, expected_u8),
    "numpy HWC float64": (f01(20, 30, 3, dtype=np.float64), None, expected_u8),
    "numpy HW float16": (f01(20, 30, dtype=np.float16), None, expected_u8),
    "numpy float out of range is clipped": (np.array([[-0.5, 0.2], [1.7, 1.0]]), None, expected_u8),
    "numpy bool": (RNG.random((20, 30)) > 0.5, None, lambda a: a.astype(np.uint8) * 255),
    "numpy non-contiguous": (u8(40, 30, 3)[::2], None, lambda a: a),
    "dataformats HWC on an ambiguous shape": (u8(3, 5, 3), "HWC", lambda a: a),
    "dataformats CHW on an ambiguous shape": (u8(3, 5, 3), "CHW", lambda a: a.transpose(1, 2, 0)),
    "dataformats WH": (u8(30, 20), "WH", lambda a: a.T),
    "dataformats lowercase hwc": (u8(20, 30, 3), "hwc", lambda a: a),
    "ambiguous numpy defaults to HWC": (u8(4, 6, 4), None, lambda a: a),
}


@pytest.mark.parametrize("name", list(CASES))
def test_numpy_images_round_trip(make_run, name):
    image, fmt, expect = CASES[name]
    run = make_run()
    run.add_image("img", image, step=3, dataformats=fmt)
    r = read_back(run)
    df = r.media("img")
    assert df["step"].to_list() == [3] and df["kind"].to_list() == ["image"]
    assert df["format"].to_list() == ["png"]
    want = expect(image)
    got = pixels(r, "img")
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, want)
    assert (df["height"][0], df["width"][0]) == want.shape[:2]
    assert df["channels"][0] == (1 if want.ndim == 2 else want.shape[2])


@pytest.mark.parametrize(
    "tensor, expect",
    [
        (torch.from_numpy(u8(3, 10, 12)), lambda t: t.numpy().transpose(1, 2, 0)),
        (torch.rand(3, 10, 12), lambda t: expected_u8(t.numpy().transpose(1, 2, 0))),
        (torch.rand(4, 10, 4), lambda t: expected_u8(t.numpy().transpose(1, 2, 0))),  # ambiguous: CHW
        (torch.rand(10, 12), lambda t: expected_u8(t.numpy())),
        (torch.rand(3, 8, 8, requires_grad=True), lambda t: expected_u8(t.detach().numpy().transpose(1, 2, 0))),
        (torch.rand(3, 8, 8).to(torch.bfloat16), lambda t: expected_u8(t.float().numpy().transpose(1, 2, 0))),
    ],
    ids=["uint8 CHW", "float CHW", "ambiguous tensor is CHW", "HW", "requires_grad", "bfloat16"],
)
def test_torch_images_round_trip(make_run, tensor, expect):
    run = make_run()
    run.add_image("t", tensor, step=0)
    np.testing.assert_array_equal(pixels(read_back(run), "t"), expect(tensor))


@pytest.mark.parametrize("mode", ["RGB", "RGBA", "L", "LA", "P", "1", "I;16"])
def test_pil_images_round_trip_in_their_mode(make_run, mode):
    base = Image.fromarray(u8(12, 17, 3))
    img = base.convert(mode) if mode != "I;16" else Image.fromarray(RNG.integers(0, 65535, (12, 17), dtype=np.uint16))
    run = make_run()
    run.add_image("pil", img, step=1)
    r = read_back(run)
    back = r.image(r.media("pil").row(0, named=True))
    assert back.size == img.size
    assert back.mode == img.mode or (mode == "I;16" and back.mode.startswith("I"))
    np.testing.assert_array_equal(np.asarray(back), np.asarray(img))


def test_pil_modes_png_cannot_hold_are_converted(make_run):
    img = Image.fromarray(u8(8, 9, 3)).convert("CMYK")
    run = make_run()
    run.add_image("cmyk", img, step=1)
    r = read_back(run)
    back = r.image(r.media("cmyk").row(0, named=True))
    np.testing.assert_array_equal(np.asarray(back), np.asarray(img.convert("RGB")))


@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])
def test_encoded_bytes_are_stored_untouched(make_run, fmt):
    buf = io.BytesIO()
    Image.fromarray(u8(21, 13, 3)).save(buf, format=fmt)
    data = buf.getvalue()
    run = make_run()
    run.add_image("enc", data, step=2)
    run.add_image("enc", bytearray(data), step=3)
    run.add_image("enc", memoryview(data), step=4)
    r = read_back(run)
    df = r.media("enc")
    assert df["format"].to_list() == [fmt.lower()] * 3
    assert (df["width"].to_list(), df["height"].to_list()) == ([13] * 3, [21] * 3)
    for row in df.iter_rows(named=True):
        assert r.media_bytes(row) == data
    assert r.image(df[0]).format == fmt


def test_caption_is_kept(make_run):
    run = make_run()
    run.add_image("c", u8(4, 4), step=0, caption="a cat, probably ✓")
    r = read_back(run)
    assert r.media("c")["caption"].to_list() == ["a cat, probably ✓"]


def test_the_caller_may_reuse_its_buffer_at_once(make_run):
    run = make_run()
    buf = np.zeros((8, 8, 3), np.uint8)
    t = torch.zeros(3, 8, 8)
    run.add_image("np", buf, step=0)
    run.add_image("torch", t, step=0)
    buf[:] = 255  # changed before the writer thread encodes
    t.fill_(1.0)
    r = read_back(run)
    assert pixels(r, "np").max() == 0
    assert pixels(r, "torch").max() == 0


def test_step_none_is_the_current_step(make_run):
    run = make_run()
    run.add_scalar("loss", 1.0, step=41)
    run.add_image("img", u8(4, 4))
    run.add_histogram("h", [1.0, 2.0])
    run.add_scalar("loss", 1.0)  # the counter was not advanced by media
    r = read_back(run)
    assert r.media()["step"].to_list() == [41, 41]
    assert r.scalars()["step"].to_list() == [41, 0]


# -- grids --------------------------------------------------------------------------


def grid_of(cells):
    """The documented grid: min(N, 8) columns, row-major, black padding."""
    n, h, w = cells.shape[:3]
    cols = min(n, 8)
    rows = -(-n // cols)
    out = np.zeros((rows * h, cols * w) + cells.shape[3:], np.uint8)
    for i, cell in enumerate(cells):
        r, c = divmod(i, cols)
        out[r * h : (r + 1) * h, c * w : (c + 1) * w] = cell
    return out


@pytest.mark.parametrize("n", [1, 3, 8, 10, 17])
def test_grid_layout_nhwc(make_run, n):
    batch = u8(n, 5, 7, 3)
    run = make_run()
    run.add_images("g", batch, step=1)
    r = read_back(run)
    np.testing.assert_array_equal(pixels(r, "g"), grid_of(batch))
    row = r.media("g").row(0, named=True)
    meta = __import__("json").loads(row["meta"])
    assert meta["images"] == n and meta["cols"] == min(n, 8) and meta["rows"] == -(-n // min(n, 8))
    assert (meta["cell_height"], meta["cell_width"]) == (5, 7)


def test_grid_forms(make_run):
    nchw = u8(10, 3, 6, 5)
    nhw = u8(5, 6, 4)
    floats = f01(4, 1, 6, 5)
    run = make_run()
    run.add_images("nchw", nchw, step=0)
    run.add_images("explicit", nchw.transpose(0, 2, 3, 1), step=0, dataformats="NHWC")
    run.add_images("nhw", nhw, step=0)
    run.add_images("float", floats, step=0)
    run.add_images("torch", torch.from_numpy(nchw), step=0)
    run.add_images("list", [nchw[0], nchw[1], torch.from_numpy(nchw[2])], step=0)
    run.add_images("caption", nhw, step=0, caption="batch 0")
    r = read_back(run)
    want = grid_of(nchw.transpose(0, 2, 3, 1))
    for tag in ("nchw", "explicit", "torch"):
        np.testing.assert_array_equal(pixels(r, tag), want)
    np.testing.assert_array_equal(pixels(r, "nhw"), grid_of(nhw))
    np.testing.assert_array_equal(pixels(r, "float"), grid_of(expected_u8(floats[:, 0])))
    np.testing.assert_array_equal(pixels(r, "list"), grid_of(nchw[:3].transpose(0, 2, 3, 1)))
    assert r.media("caption")["caption"].to_list() == ["batch 0"]


# -- figures ------------------------------------------------------------------------


def test_figure_is_drawn_and_closed(make_run):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    ref = Figure(figsize=(2, 1.5), dpi=50)
    ref.add_subplot().plot([0, 1, 4, 9])
    canvas = FigureCanvasAgg(ref)
    canvas.draw()
    want = np.asarray(canvas.buffer_rgba())[..., :3].copy()

    fig = plt.figure(figsize=(2, 1.5), dpi=50)
    fig.add_subplot().plot([0, 1, 4, 9])
    run = make_run()
    run.add_figure("fig", fig, step=5)
    assert plt.get_fignums() == []  # closed after drawing
    keep = plt.figure(figsize=(2, 1.5), dpi=50)
    run.add_figure("kept", keep, step=5, close=False)
    assert plt.get_fignums() == [keep.number]
    plt.close(keep)
    plain = Figure(figsize=(2, 1.5), dpi=50)  # no pyplot, no canvas of its own
    plain.add_subplot().plot([0, 1, 4, 9])
    run.add_figure("plain", plain, step=6)
    run.add_figure("two", [Figure(figsize=(1, 1), dpi=20), Figure(figsize=(1, 1), dpi=20)], step=7)
    r = read_back(run)
    df = r.media()
    assert df["tag"].to_list() == ["fig", "kept", "plain", "two"]
    assert '"source":"figure"' in df["meta"][0]
    np.testing.assert_array_equal(pixels(r, "fig"), want)
    np.testing.assert_array_equal(pixels(r, "plain"), want)
    assert (df["width"][3], df["height"][3]) == (40, 20)
