"""nb media RUN: list records, write files (PNG, JPEG, WAV, CSV) with clear, safe names."""

from __future__ import annotations

import csv
import io
import json
import os
import wave
from pathlib import Path

import numpy as np
import pytest
from _media_helpers import read_back
from PIL import Image
from typer.testing import CliRunner

from nbcli.app import app


@pytest.fixture
def cli():
    runner = CliRunner()

    def invoke(*args: str):
        env = {k: None for k in os.environ if k.startswith(("NB_", "RANK", "FORCE_COLOR", "NO_COLOR"))}
        env["COLUMNS"] = "200"
        return runner.invoke(app, list(args), env=env)

    return invoke


@pytest.fixture
def logged(make_run):
    run = make_run(run_id="media-1")
    jpeg = io.BytesIO()
    Image.fromarray(np.full((6, 5, 3), 200, np.uint8)).save(jpeg, format="JPEG")
    for step in (0, 10):
        run.add_image("val/pred", np.full((4, 6, 3), step, np.uint8), step=step, caption=f"at {step}")
        run.add_histogram("grad/w", np.arange(100.0) + step, step=step, bins=4)
    run.add_audio("speech", np.zeros(800), step=10, sample_rate=8000)
    run.add_image("photo", jpeg.getvalue(), step=3)
    run.add_image("../../escape", np.zeros((2, 2), np.uint8), step=1)
    run.add_image("a b", np.zeros((2, 2), np.uint8), step=1)
    run.add_image("a_b", np.ones((2, 2), np.uint8), step=1)
    read_back(run)
    return run


def test_list_plain_and_json(cli, logged):
    result = cli("media", logged.dir)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split("\t") == ["TAG", "STEP", "KIND", "FORMAT", "SIZE", "DETAIL", "SESSION", "LOGGED"]
    assert any(line.startswith("val/pred\t10\timage\tpng\t") and "6x4x3" in line for line in lines)
    result = cli("media", logged.dir, "--json", "--kind", "histogram")
    rows = json.loads(result.stdout)
    assert [(r["tag"], r["step"], r["bins"]) for r in rows] == [("grad/w", 0, 4), ("grad/w", 10, 4)]
    assert "meta" not in rows[0]


def test_write_files(cli, logged, tmp_path):
    out = tmp_path / "out"
    result = cli("media", logged.dir, "-o", str(out))
    assert result.exit_code == 0, result.stderr
    assert "wrote 9 files" in result.stderr
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert "val/pred/step_000000.png" in files and "val/pred/step_000010.png" in files
    assert "grad/w/step_000010.csv" in files and "speech/step_000010.wav" in files
    assert "photo/step_000003.jpg" in files
    printed = result.stdout.splitlines()
    assert sorted(printed) == sorted(str(out / f) for f in files)
    assert printed[:6] == [str(out / f) for f in LOG_ORDER]  # as logged
    assert np.asarray(Image.open(out / "val/pred/step_000010.png")).max() == 10
    with wave.open(str(out / "speech/step_000010.wav")) as w:
        assert (w.getframerate(), w.getnframes(), w.getsampwidth()) == (8000, 800, 2)
    with open(out / "grad/w/step_000010.csv") as f:
        rows = list(csv.DictReader(f))
    counts, edges = np.histogram(np.arange(100.0) + 10, bins=4)
    assert [int(r["count"]) for r in rows] == counts.tolist()
    assert [float(r["bin_left"]) for r in rows] == edges[:-1].tolist()
    assert {r["num"] for r in rows} == {"100"} and float(rows[0]["max"]) == 109.0


LOG_ORDER = ["val/pred/step_000000.png", "grad/w/step_000000.csv", "val/pred/step_000010.png",
             "grad/w/step_000010.csv", "speech/step_000010.wav", "photo/step_000003.jpg"]


def test_tag_names_never_escape_the_folder(cli, logged, tmp_path):
    out = tmp_path / "deep" / "out"
    result = cli("media", logged.dir, "-o", str(out), "--tag", "*escape", "--tag", "a?b", "--json")
    assert result.exit_code == 0, result.stderr
    written = json.loads(result.stdout)
    paths = [Path(w["path"]) for w in written]
    assert len(paths) == 3 and len(set(p.parent for p in paths)) == 3  # "a b" and "a_b" apart
    for p in paths:
        assert p.resolve().is_relative_to(out.resolve()) and p.is_file()
        assert ".." not in p.relative_to(out).parts
    assert not (tmp_path / "escape").exists()
    assert {w["tag"] for w in written} == {"../../escape", "a b", "a_b"}
    assert {str(p.parent.relative_to(out)) for p in paths} == {
        "__/__/escape~c1a232ee", "a_b~7dbde935", "a_b"}


def test_step_tag_and_rank_filters(cli, logged, tmp_path):
    result = cli("media", logged.dir, "-o", str(tmp_path / "o"), "--step", "10", "--tag", "val/*", "--json")
    assert [(w["tag"], w["step"], w["caption"]) for w in json.loads(result.stdout)] == [("val/pred", 10, "at 10")]
    result = cli("media", logged.dir, "-o", str(tmp_path / "o2"), "--rank", "1")  # only rank 0 logged
    assert result.exit_code == 1
    assert "rank 1 has no event log" in result.stderr and "ranks with event logs: 0" in result.stderr
    assert not (tmp_path / "o2").exists()


def test_hidden_records_only_on_request(cli, make_run, tmp_path):
    run = make_run(run_id="hid")
    for step in range(3):
        run.add_image("img", np.full((2, 2), step, np.uint8), step=step)
    run.finish()
    run = make_run(run_id="hid", resume="auto")
    run.add_image("img", np.full((2, 2), 99, np.uint8), step=1)
    read_back(run)
    result = cli("media", run.dir, "-o", str(tmp_path / "a"), "--json")
    assert [(w["session"], w["step"]) for w in json.loads(result.stdout)] == [(0, 0), (1, 1)]
    result = cli("media", run.dir, "-o", str(tmp_path / "b"), "--json", "--include-hidden")
    names = [Path(w["path"]).name for w in json.loads(result.stdout)]
    assert names == ["step_000000.png", "step_000001.png", "step_000002.png", "step_000001_2.png"]


def test_a_corrupt_blob_is_reported_and_the_rest_written(cli, logged, tmp_path):
    pack = Path(logged.dir) / "media.r0.pack"
    data = bytearray(pack.read_bytes())
    rows = json.loads(cli("media", logged.dir, "--json").stdout)
    data[rows[0]["offset"] + 3] ^= 0xFF
    pack.write_bytes(bytes(data))
    result = cli("media", logged.dir, "-o", str(tmp_path / "o"))
    assert result.exit_code == 1
    assert "checksum" in result.stderr and "error: 1 media record could not be read" in result.stderr
    assert len(result.stdout.splitlines()) == 8  # all but the corrupt one


def test_unknown_run(cli, root):
    result = cli("media", "nope", "--root", str(root))
    assert result.exit_code == 1 and "error: no run matches 'nope'" in result.stderr


def test_show_checks_media_packs_against_their_references(cli, logged):
    def show():
        result = cli("show", logged.dir, "--json")
        assert result.exit_code == 0, result.stderr
        return json.loads(result.stdout)

    (pack,) = show()["media"]
    n = pack["records"]
    assert pack["rank"] == 0 and pack["missing"] == 0 and n > 2 and pack["size_bytes"] > 0
    path = os.path.join(logged.dir, pack["file"])
    with open(path, "r+b") as f:
        f.truncate(pack["size_bytes"] // 2)
    info = show()
    assert 0 < info["media"][0]["missing"] < n and info["problems"]["media_missing"] == info["media"][0]["missing"]
    plain = cli("show", logged.dir)
    assert "point past the end of their pack" in plain.stderr and "Media packs" in plain.stdout
    os.remove(path)
    info = show()
    assert info["media"][0]["size_bytes"] is None and info["media"][0]["missing"] == n


def test_show_notes_a_live_sessions_unseen_media_instead_of_warning(cli, tmp_path):
    """A pack seen short for a session still writing (a shared filesystem's cached size)
    is "not visible yet", a note; nb show warned that records point past the end."""
    import numpy as np

    import nblog as nb

    run = nb.init("p", run_id="live-00000001", root=str(tmp_path), system=False, _environ={})
    for step in range(3):
        run.add_image("img", np.zeros((4, 4), np.uint8), step=step)
    run.flush()
    pack = os.path.join(run.dir, "media.r0.pack")
    os.truncate(pack, os.path.getsize(pack) - 10)
    try:
        result = cli("show", run.dir)
        assert result.exit_code == 0, result.stderr
        assert "past the end" not in result.stderr
        assert "1 media record of a session still writing is not visible here yet" in result.stderr
        info = json.loads(cli("show", run.dir, "--json").stdout)
        assert info["problems"]["media_missing"] == 0 and info["problems"]["media_not_visible"] == 1
    finally:
        run.finish()
    assert "past the end of their pack" in cli("show", run.dir).stderr


def test_a_symlink_planted_in_the_output_folder_is_replaced_never_written_through(cli, logged, tmp_path):
    out = tmp_path / "out"
    victims = {}
    for rel in ("val/pred/step_000010.png", "grad/w/step_000010.csv"):  # a blob and a histogram CSV
        victim = tmp_path / f"victim-{len(victims)}.txt"
        victim.write_text("keep me")
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).symlink_to(victim)
        victims[rel] = victim
    result = cli("media", logged.dir, "-o", str(out))
    assert result.exit_code == 0, result.stderr
    for rel, victim in victims.items():
        assert victim.read_text() == "keep me"
        assert not (out / rel).is_symlink() and (out / rel).is_file()
    assert np.asarray(Image.open(out / "val/pred/step_000010.png")).max() == 10


def test_a_symlinked_folder_in_the_output_folder_is_refused(cli, logged, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / "val").symlink_to(elsewhere)
    result = cli("media", logged.dir, "-o", str(out), "--tag", "val/*")
    assert result.exit_code == 1 and "is a symlink" in result.stderr and "Traceback" not in result.stderr
    assert list(elsewhere.iterdir()) == []
