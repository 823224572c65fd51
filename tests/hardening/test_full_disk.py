"""A disk that fills up mid-run (SPEC §5: warn, count what was dropped, keep training
alive), on a real 2 MiB tmpfs mounted by the test (skipped where mounting is not
allowed): training goes on, one warning, dropped points counted in the session,
nothing written before the failure corrupted, and logging continues once space
comes back. Points and texts are accounted for exactly: read + dropped == logged.
"""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest
from hardkit import mounted_tmpfs

import nblog as nb

LATE = [f"late/{i}/" + "x" * 1000 for i in range(8)]


def free_bytes(path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def fill(disk, leave: int):
    """A filler file that leaves about ``leave`` bytes free."""
    filler = disk / "filler"
    with open(filler, "wb") as f:
        f.write(b"\0" * max(0, free_bytes(disk) - leave))
    return filler


def nblog_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "nblog" and r.levelno >= logging.WARNING]


@pytest.fixture
def disk(tmp_path):
    with mounted_tmpfs(tmp_path / "disk", "2m") as path:
        yield path


def test_a_full_disk_drops_counts_and_recovers(disk, caplog):
    caplog.set_level(logging.INFO, logger="nblog")
    run = nb.init("full", run_id="full-00000000", root=disk / "runs", system=False, flush_interval=60,
                  _environ={}, provenance=False)  # its diff alone could fill the 2 MiB
    filler = fill(disk, 150_000)
    logged_points = logged_texts = 0
    step = 0
    full_seen = False

    def one_round(extra_tag: bool) -> None:
        nonlocal step, logged_points, logged_texts
        for _ in range(1000):
            run.add_scalar({"a": float(step), "b": -float(step)}, step=step)
            logged_points += 2
            if extra_tag:  # tags first used while the disk is full: 8 KiB of definitions
                run.add_scalar({tag: step + 0.5 for tag in LATE}, step=step)
                logged_points += len(LATE)
            step += 1
        run.add_text("t", f"text at {step - 1} " + "x" * 2000, step=step - 1)
        logged_texts += 1
        run.flush()  # a real barrier: every write was attempted

    for i in range(30):  # ~50 KB a round: the disk fills after a few
        one_round(extra_tag=i >= 15)
        full_seen |= free_bytes(disk) < 8192
    assert full_seen
    dropped_while_full = nb.RunReader(run.dir)
    assert dropped_while_full.scalars("a")["step"].to_list()[:1000] == list(range(1000))  # the start is intact
    filler.unlink()  # space comes back
    for _ in range(5):
        one_round(extra_tag=True)
    run.finish()

    warnings = nblog_warnings(caplog)
    assert len(warnings) == 1, warnings
    assert "cannot write" in warnings[0] and "No space left on device" in warnings[0]
    r = nb.RunReader(run.dir)
    (s,) = r.sessions()
    assert s["skipped_bytes"] == 0 and s["pending_bytes"] == 0 and s["end"] is not None
    dropped = s["dropped"].get("write_error", 0)
    assert dropped > 0
    df = r.scalars()
    tx = r.text()
    assert len(df) + len(tx) + dropped == logged_points + logged_texts
    for tag, sign, off in (("a", 1, 0.0), ("b", -1, 0.0), *((t, 1, 0.5) for t in LATE)):
        part = df.filter(df["tag"] == tag)
        assert (part["value"].to_numpy() == sign * part["step"].to_numpy() + off).all()
    # what was written before the failure is a clean prefix; the end is there again
    a = df.filter(df["tag"] == "a")["step"].to_list()
    assert a[:1000] == list(range(1000))
    assert a[-5000:] == list(range(step - 5000, step))
    for tag in LATE:  # their definitions were not lost with the disk full
        late = df.filter(df["tag"] == tag)["step"].to_list()
        assert late[-5000:] == list(range(step - 5000, step)), tag
    assert all(t.startswith(f"text at {st} ") for st, t in zip(tx["step"].to_list(), tx["text"].to_list(),
                                                                strict=True))


def test_media_on_a_full_disk_is_dropped_counted_and_never_torn(disk, caplog):
    caplog.set_level(logging.INFO, logger="nblog")
    run = nb.init("full", run_id="media-00000000", root=disk / "runs", system=False, flush_interval=60,
                  _environ={}, provenance=False)  # its diff alone could fill the 2 MiB
    filler = fill(disk, 120_000)
    rng = np.random.default_rng(0)
    images = {}
    for step in range(60):  # incompressible 64x64 RGB: ~12 KB per PNG
        images[step] = rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)
        run.add_image("noise", images[step], step=step)
        run.add_scalar("x", float(step), step=step)
        run.flush()
    filler.unlink()
    for step in range(60, 70):
        images[step] = rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)
        run.add_image("noise", images[step], step=step)
        run.add_scalar("x", float(step), step=step)
    run.finish()

    warnings = nblog_warnings(caplog)
    assert any("cannot write media" in w and "No space left" in w for w in warnings), warnings
    assert len(warnings) <= 2, warnings  # one for the media pack, at most one for the event log
    r = nb.RunReader(run.dir)
    (s,) = r.sessions()
    md = r.media()
    dropped = s["dropped"].get("write_error", 0)
    assert 0 < len(md) < 70 and dropped > 0
    for row in md.iter_rows(named=True):  # every reference reads back its exact pixels
        assert np.array_equal(np.asarray(r.image(row)), images[row["step"]])
    assert md["step"].to_list()[-10:] == list(range(60, 70))
    sc = r.scalars("x")
    assert len(sc) + len(md) + dropped == 140


def _files(folder) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_a_new_run_on_a_full_disk_raises_once_and_leaves_nothing(disk, caplog):
    """A new run has recorded nothing yet: init raises (an unwritable root fails fast),
    says so in one message, without a "training goes on" before it, and removes the
    folders it made (no empty event log, no "unknown" run in nb ls)."""
    caplog.set_level(logging.INFO, logger="nblog")
    root = disk / "runs"
    root.mkdir()
    filler = fill(disk, 0)
    with pytest.raises(OSError) as info:
        nb.init("full", run_id="full2", root=root, system=False, _environ={}, provenance=False)
    assert info.value.errno == 28 and "nothing was recorded" in str(info.value), info.value
    assert nblog_warnings(caplog) == []  # no "training goes on" before the raise
    assert _files(root) == []  # neither the run folder nor the project folder is left
    filler.unlink()
    run = nb.init("full", run_id="full2", root=root, system=False, _environ={}, provenance=False)
    run.add_scalar("x", 1.0, step=0)
    run.finish()
    assert nb.RunReader(run.dir).scalars("x")["value"].to_list() == [1.0]


REQUEUE = """
import sys, nblog as nb
run = nb.init("full", run_id="full2", root=sys.argv[1], resume="auto", system=False, provenance=False)
for step in range(100):
    run.add_scalar("loss", 1.0 / (step + 1))
run.finish()
print("TRAINED", run.session, flush=True)
"""


def test_a_requeue_onto_a_full_disk_keeps_training(disk):
    """A resume (Slurm requeue) onto a full disk: the job was running before, so
    training goes on (exit 0) with one warning that names run.json and says the
    session is not recorded; the run keeps its history and gets no phantom session.
    ``run.session`` is that session's number, as the warning says."""
    import subprocess
    import sys

    from hardkit import clean_env

    root = disk / "runs"
    env = clean_env()
    first = subprocess.run([sys.executable, "-c", REQUEUE, str(root)], env=env, capture_output=True,
                           text=True, timeout=120)
    assert first.returncode == 0 and "TRAINED 0" in first.stdout, first.stderr
    before = (root / "full" / "full2" / "run.json").read_bytes()
    filler = fill(disk, 0)
    second = subprocess.run([sys.executable, "-c", REQUEUE, str(root)], env=env, capture_output=True,
                            text=True, timeout=120)
    filler.unlink()
    assert second.returncode == 0 and "TRAINED" in second.stdout, second.stderr
    lines = [ln for ln in second.stderr.splitlines() if ln.startswith("nblog")]
    assert len(lines) == 1 and "cannot write" in lines[0] and "No space left" in lines[0], second.stderr
    assert "training goes on" in lines[0] and "session 1 of run 'full2' is not recorded" in lines[0]
    # run.session is the session the warning names, not 0 (the session that is recorded)
    assert "TRAINED 1" in second.stdout, second.stdout
    run_dir = root / "full" / "full2"
    assert (run_dir / "run.json").read_bytes() == before
    assert not (run_dir / "events.r0.s1.log").exists()
    r = nb.RunReader(str(run_dir))
    assert [s["session"] for s in r.sessions()] == [0]
