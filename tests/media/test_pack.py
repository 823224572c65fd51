"""The media pack on disk: its framing, ``kill -9`` in the middle of logging images,
torn blobs left by a killed session, resume hiding, corruption detected on read."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import numpy as np
import pytest
from _media_helpers import read_back

import nblog as nb
from nblog.format import _pack as P

REPO = Path(__file__).resolve().parents[2]


def blobs_in(path):
    """Walk the pack's frames: [(type, payload offset, length)], checking every checksum."""
    data = Path(path).read_bytes()
    assert data[:8] == struct.pack("<4sHH", b"NBMP", 1, 0)
    pos, out = 8, []
    while pos < len(data):
        magic, kind, length, crc, hcrc = struct.unpack_from("<3sBQII", data, pos)
        assert magic == b"NBB" and zlib.crc32(data[pos : pos + 16]) == hcrc
        payload = data[pos + 20 : pos + 20 + length]
        assert zlib.crc32(payload) == crc
        out.append((kind, pos + 20, length))
        pos += 20 + length
    return out


def test_pack_layout_matches_the_references(make_run):
    run = make_run()
    run.add_image("img", np.zeros((4, 4), np.uint8), step=0)
    run.add_histogram("h", [1.0, 2.0], step=1, bins=2)
    run.add_audio("a", np.zeros(8), step=2, sample_rate=8)
    r = read_back(run)
    blobs = blobs_in(os.path.join(run.dir, "media.r0.pack"))
    df = r.media()
    assert [(k, o, n) for k, o, n in blobs] == list(
        zip([P.BLOB_PNG, P.BLOB_HISTOGRAM, P.BLOB_WAV], df["offset"], df["length"], strict=True)
    )
    assert len(r.media_bytes(df.row(1, named=True))) == 16 * 2 + 8


def test_a_corrupt_blob_is_reported_never_returned(make_run):
    run = make_run()
    run.add_image("img", np.zeros((4, 4), np.uint8), step=0)
    r = read_back(run)
    row = r.media().row(0, named=True)
    path = os.path.join(run.dir, "media.r0.pack")
    data = bytearray(Path(path).read_bytes())
    data[row["offset"] + 5] ^= 0xFF
    Path(path).write_bytes(bytes(data))
    with pytest.raises(nb.BlobError, match="checksum") as err:  # public: callers catch it by name
        r.media_bytes(row)
    assert isinstance(err.value, nb.NbError) and err.value.path == path and err.value.offset == row["offset"]
    with pytest.raises(ValueError, match="reference says"):
        r.media_bytes(dict(row, length=row["length"] - 1))
    Path(path).write_bytes(bytes(data[: row["offset"] + 3]))
    with pytest.raises(P.BlobError, match="torn"):
        r.media_bytes(row)


KILLED = """
import sys, numpy as np, nblog as nb
run = nb.init("k", run_id="killed", resume="auto", system=False)
rng = np.random.default_rng(int(sys.argv[1]))
img = rng.integers(0, 256, size=(768, 768, 3), dtype=np.uint8)  # noise: ~1.7 MB of PNG
step = int(sys.argv[2])
while True:
    img[step % 768] = 0
    run.add_image("big", img, step=step)
    run.add_histogram("h", img.reshape(-1)[:100000], step=step)
    run.add_scalar("loss", 1.0 / (step + 1), step=step)
    step += 1
    if step % 8 == 0:
        run.flush()  # keeps the backlog (and this test's memory) small
"""


def records_of_session(run_dir, session):
    try:
        df = nb.RunReader(run_dir).media("big", include_hidden=True)
    except Exception:  # the folder or run.json is not there yet
        return 0
    return df.filter(df["session"] == session).height


def run_and_kill(tmp_path, seed, first_step, session, min_records):
    """Start the training script, SIGKILL it once ``min_records`` images are referenced."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NB_", "SLURM_", "OMPI_", "RANK", "TORCHELASTIC"))}
    env.update(NB_DIR=str(tmp_path), NB_FLUSH_INTERVAL="0.02", PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(seed), str(first_step)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    run_dir = tmp_path / "k" / "killed"
    deadline = time.monotonic() + 90
    try:
        while records_of_session(run_dir, session) < min_records:
            if proc.poll() is not None:
                pytest.fail(f"the training script died: {proc.stderr.read()}")
            if time.monotonic() > deadline:
                pytest.fail("no media referenced in time")
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    return run_dir


@pytest.mark.slow
def test_kill_9_while_logging_large_images(tmp_path):
    run_dir = run_and_kill(tmp_path, seed=1, first_step=0, session=0, min_records=4)
    # a torn blob like the one kill -9 leaves mid-write (whether or not this kill did)
    with open(run_dir / "media.r0.pack", "ab") as f:
        f.write(P.blob_header(P.BLOB_PNG, b"x" * 1000) + b"x" * 300)
    r = nb.RunReader(run_dir)
    df = r.media()
    assert df.height >= 1
    for row in df.iter_rows(named=True):
        data = r.media_bytes(row)  # verified against its reference and both checksums
        assert len(data) == row["length"]
        if row["kind"] == "image":
            img = r.image(row)
            assert img.size == (768, 768)
    # a new session appends after the torn bytes; everything referenced still verifies
    run_and_kill(tmp_path, seed=2, first_step=1_000_000, session=1, min_records=4)
    r = nb.RunReader(run_dir)
    df = r.media(include_hidden=True)
    assert set(df["session"]) == {0, 1}
    for row in df.iter_rows(named=True):
        r.media_bytes(row)
    assert r.media()["step"].min() < 1_000_000  # session 1 started later: hides nothing


def test_torn_blob_then_resume(make_run, root):
    run = make_run(run_id="torn")
    run.add_image("img", np.full((4, 4), 7, np.uint8), step=0)
    run.finish()
    pack = os.path.join(run.dir, "media.r0.pack")
    with open(pack, "ab") as f:  # what kill -9 mid-blob leaves: a header, part of a payload
        f.write(P.blob_header(P.BLOB_PNG, b"y" * 5000) + b"y" * 1234)
    torn_end = os.path.getsize(pack)
    run = make_run(run_id="torn", resume="auto")
    run.add_image("img", np.full((4, 4), 9, np.uint8), step=1)
    r = read_back(run)
    df = r.media()
    assert df["step"].to_list() == [0, 1]
    # the resume writes a pack of its own (issue 13); the torn blob stays unreferenced
    assert os.path.getsize(pack) == torn_end
    assert os.path.exists(os.path.join(run.dir, "media.r0.s1.pack"))
    assert df["offset"][1] == P.PACK_HEADER.size + P.BLOB_HEADER_SIZE
    assert [int(np.asarray(r.image(row)).max()) for row in df.iter_rows(named=True)] == [7, 9]


def test_a_pack_with_a_torn_file_header_is_started_again(make_run):
    run = make_run(run_id="hdr")
    run.add_scalar("x", 1.0, step=0)
    run.finish()
    with open(os.path.join(run.dir, "media.r0.pack"), "wb") as f:
        f.write(b"NBM")  # the header was being written when the process died
    run = make_run(run_id="hdr", resume="auto")
    run.add_image("img", np.zeros((3, 3), np.uint8), step=1)
    r = read_back(run)
    assert r.media().height == 1
    r.media_bytes(r.media().row(0, named=True))


def test_resume_hides_media_per_rank(make_run):
    run = make_run(run_id="res")
    for step in range(10):
        run.add_image("img", np.full((2, 2), step, np.uint8), step=step)
        run.add_histogram("h", [float(step)], step=step)
    run.finish()
    run = make_run(run_id="res", resume="auto")  # restarted from a checkpoint at step 5
    for step in range(5, 8):
        run.add_image("img", np.full((2, 2), 100 + step, np.uint8), step=step)
        run.add_histogram("h", [float(step)], step=step)
    r = read_back(run)
    df = r.media("img")
    assert list(zip(df["session"], df["step"], strict=True)) == [(0, s) for s in range(5)] + [(1, s) for s in range(5, 8)]
    assert [int(np.asarray(r.image(row))[0, 0]) for row in df.iter_rows(named=True)] == list(range(5)) + [105, 106, 107]
    everything = r.media("img", include_hidden=True)
    assert everything.height == 13
    assert everything.filter(everything["hidden"])["step"].to_list() == list(range(5, 10))
    assert r.histograms("h")["step"].unique(maintain_order=True).to_list() == list(range(8))
    assert r.histograms("h", include_hidden=True)["step"].n_unique() == 10
    hidden = [s["hidden_points"] for s in r.sessions()]
    assert hidden[0] >= 10  # 5 images + 5 histograms of session 0 are hidden
    from nblog.reader._answers.overview import tag_table  # what nb show lists: visible records only

    media = {t["tag"]: (t["points"], t["last_step"]) for t in tag_table(r) if t["kind"] == "media"}
    assert media == {"img": (8, 7), "h": (8, 7)}


def test_one_bad_histogram_blob_leaves_out_that_histogram_only(make_run, caplog):
    run = make_run()
    for step in range(4):
        run.add_histogram("h", [float(step), step + 1.0], step=step)
        run.add_histogram("g", [float(step)], step=step)
    r = read_back(run)
    bad = r.media("h", kind="histogram").row(2, named=True)
    path = os.path.join(run.dir, "media.r0.pack")
    data = bytearray(Path(path).read_bytes())
    data[bad["offset"] + bad["length"] // 2] ^= 0xFF
    Path(path).write_bytes(bytes(data))
    with caplog.at_level("WARNING", logger="nblog"):
        df = r.histograms()
    assert df.filter(df["tag"] == "h")["step"].unique().sort().to_list() == [0, 1, 3]
    assert df.filter(df["tag"] == "g")["step"].unique().sort().to_list() == [0, 1, 2, 3]
    assert "1 of 8 histograms" in caplog.text
    os.remove(path)  # no pack at all: nothing readable, still no exception
    assert r.histograms().height == 0
