"""Runs started on machine A, read live and resumed on machine B: two sshfs mounts of
one folder (see conftest.py). Every test here fails on the nblog before issue 13."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import nblog as nb

pytestmark = pytest.mark.sharedfs

RID = "shared-00000001"


def start(root: Path, host: str, rid: str = RID, **kw) -> nb.Run:
    return nb.init("p", run_id=rid, root=str(root / "runs"), config={"lr": 0.1}, resume="auto",
                   system=False, _environ={"NB_HOSTNAME": host}, **kw)


def server_meta(a: Path, rid: str = RID) -> dict:
    """run.json as the server has it (read through a fresh lookup on A)."""
    return json.loads((a / "runs" / "p" / rid / "run.json").read_text())


@pytest.mark.parametrize("variant", ["default", "long"])
def test_b_reads_the_run_until_a_finishes_then_resumes_it_and_keeps_its_history(mounts, variant):
    """B's cached size of run.json is the one before A replaced it: B's read stops
    short, and the resume on B used to write run.json afresh (sessions, hosts, created
    and config of the run gone), and a reader on B kept ``meta == {}``."""
    a, b = mounts(variant, variant)
    run_b = b / "runs" / "p" / RID
    run = start(a, "A")
    run.add_scalar("x", 0.0, step=0)
    created = server_meta(a)["created"]
    for step in range(1, 20):  # B reads the run while A writes it, as nb ls/show/tui do
        run.add_scalar("x", float(step), step=step)
        run.flush()
        assert nb.RunReader(run_b).meta.get("id") in (RID, None)
    run.finish()
    os.stat(run_b / "run.json")  # B's last look, before A's final update was seen
    run = start(b, "B")  # at once, within every cache time
    run.add_scalar("x", 99.0, step=50)
    run.finish()
    meta = server_meta(a)
    assert [s["session"] for s in meta["sessions"]] == [0, 1]
    assert meta["created"] == created and meta["config"] == {"lr": 0.1}
    assert meta["hosts"] == ["A", "B"]

    run = start(a, "A")  # and a reader on B, looking while A resumes
    os.stat(run_b / "run.json")
    run.finish()
    os.stat(run_b / "run.json")
    reader = nb.RunReader(run_b)
    assert [s["session"] for s in reader.meta.get("sessions", [])] == [0, 1, 2], "a reader on B got {}"


def test_a_server_without_posix_rename_never_fails_an_update_or_a_resume(mounts, caplog):
    """Renaming onto run.json fails with EPERM there: every update of run.json failed
    (the run stayed "running", first_step null) and a resume raised PermissionError."""
    a, _b = mounts("norename", "norename")
    run = start(a, "A")
    run.add_scalar("x", 1.0, step=3)
    run.flush()
    run.finish()
    meta = server_meta(a)
    assert meta["status"] == "finished" and meta["sessions"][0]["first_step"] == 3
    run = start(a, "A")  # the resume
    run.add_scalar("x", 2.0, step=4)
    run.finish()
    meta = server_meta(a)
    assert [s["session"] for s in meta["sessions"]] == [0, 1] and meta["status"] == "finished"
    assert "workaround=rename" in caplog.text
    assert not [n for n in os.listdir(a / "runs" / "p" / RID) if n.endswith((".old", ".tmp"))]
    assert nb.RunReader(a / "runs" / "p" / RID).scalars()["value"].to_list() == [1.0, 2.0]


def test_a_new_run_is_found_by_its_bare_id_at_once(mounts):
    """B lists the project folder from sshfs's directory cache (20 s): a run A just
    created was not found by its bare id, while PROJECT/ID and a path were."""
    a, b = mounts()
    start(a, "A", rid="first-00000001").finish()
    assert nb.RunReader("first-00000001", root=b / "runs").id == "first-00000001"  # B lists p/ now
    start(a, "A", rid="second-00000002").finish()
    assert nb.RunReader("second-00000002", root=b / "runs").id == "second-00000002"


READER = textwrap.dedent("""
    import os, sys
    import nblog as nb
    run_dir, how, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    reader = nb.RunReader(run_dir)
    reader.files(0)  # read and checksummed on B
    print("loaded", flush=True)
    sys.stdin.readline()  # A changes the file now
    values = reader.scalars()["value"].to_list()
    assert values == [s * 0.5 for s in range(steps)], "values that were never written"
    reader.refresh()  # and reads what is there now: never a crash
    reader.scalars()
    print("ok", flush=True)
""")


@pytest.mark.parametrize("how", ["truncate", "replace", "overwrite"])
def test_a_finished_log_changed_on_a_under_a_reader_on_b(mounts, how):
    """A finished event log mapped by a reader on B: truncated on A it killed the
    reader with SIGBUS; overwritten in place it gave values never written."""
    a, b = mounts()
    steps = 300_000  # about 7 MiB: large enough that it used to be mapped
    run = start(a, "A")
    for step in range(steps):
        run.add_scalar("x", step * 0.5, step=step)
    run.finish()
    path = a / "runs" / "p" / RID / "events.r0.s0.log"
    child = subprocess.Popen([sys.executable, "-c", READER, str(b / "runs" / "p" / RID), how, str(steps)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "loaded"
        size = path.stat().st_size
        if how == "truncate":
            os.truncate(path, 4096)
        elif how == "replace":
            tmp = path.with_name("x.tmp")
            tmp.write_bytes(b"\0" * 100)
            os.replace(tmp, path)
        else:
            with open(path, "r+b") as f:
                f.seek(4096)
                f.write(b"\x55" * (size - 4096))
        out, err = child.communicate("go\n", timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, f"reader on B died (rc {child.returncode}): {err[-1500:]}"
    assert out.split() == ["ok"]


def test_every_point_written_on_a_arrives_on_b_once_caches_expire(mounts):
    """A live run on A, read on B with refresh(): every point arrives, once each."""
    a, b = mounts()
    run = start(a, "A")
    reader = None
    for step in range(2000):
        run.add_scalar("x", float(step), step=step)
        if step % 500 == 0:
            run.flush()
            reader = reader or nb.RunReader(b / "runs" / "p" / RID)
            reader.refresh()
            reader.scalars()
    run.finish()
    deadline = time.monotonic() + 90  # far beyond the caches' 20 s
    while True:
        reader.refresh()
        got = reader.scalars()["step"].to_list()
        if len(got) >= 2000 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert got == list(range(2000))


RANK1 = textwrap.dedent("""
    import logging, sys
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    import nblog as nb
    run = nb.init("p", system=False)
    print("joined" if run.dir else "gave up", flush=True)
    run.finish()
""")


def test_a_rank_on_b_joins_through_a_negative_lookup_cache(mounts):
    """Another process of machine B looked the run up before rank 0 (on A) made it: B's
    kernel then answers "absent" for negative_timeout (60 s here), and rank 1 gave up
    after NB_WAIT_S although rank 0 had opened the run long before."""
    a, b = mounts("negative", "negative")
    start(a, "A", rid="before-00000001").finish()  # the project folder exists
    assert not (b / "runs" / "p" / RID / "run.json").exists()  # cached as absent on B now
    rank0 = start(a, "A")
    env = {**os.environ, "NB_DIR": str(b / "runs"), "NB_RUN_ID": RID, "NB_WAIT_S": "15",
           "RANK": "1", "LOCAL_RANK": "0", "WORLD_SIZE": "2", "NB_HOSTNAME": "B"}
    for k in ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "SLURM_PROCID"):
        env.pop(k, None)
    res = subprocess.run([sys.executable, "-c", RANK1], env=env, capture_output=True, text=True, timeout=60)
    rank0.finish()
    assert res.stdout.split() == ["joined"], res.stderr[-1500:]


@pytest.mark.parametrize("variant", ["default", "long"])
def test_media_of_a_run_resumed_on_b_are_read_back_exactly(mounts, variant):
    """B's cached size of A's media pack is short right after A appended: a resume on
    B that appended to it recorded its blobs at wrong offsets. Each session after the
    pack's first now writes a pack of its own, created exclusively."""
    import numpy as np

    a, b = mounts(variant, variant)
    pack_b = b / "runs" / "p" / RID / "media.r0.pack"
    run = start(a, "A")
    run.add_image("img", np.full((8, 8), 0, np.uint8), step=0)
    run.flush()
    os.stat(pack_b)  # nb show / nb tui on B look at the pack while A writes
    for step in range(1, 5):
        run.add_image("img", np.full((8, 8), step, np.uint8), step=step)
    run.finish()
    run = start(b, "B")
    for step in range(5, 10):
        run.add_image("img", np.full((8, 8), step, np.uint8), step=step)
    run.add_histogram("h", np.arange(10.0), step=9)
    run.finish()
    reader = nb.RunReader(a / "runs" / "p" / RID)
    media = reader.media("img")
    assert media["step"].to_list() == list(range(10))
    for row in media.iter_rows(named=True):
        assert np.asarray(reader.image(row)).max() == row["step"]
        no_session = {k: row[k] for k in ("rank", "offset", "length", "kind")}  # as nb tui asks
        assert np.asarray(reader.image(no_session)).max() == row["step"]
    assert len(reader.histograms("h")) > 0


MEDIA_WRITER = textwrap.dedent("""
    import sys
    import numpy as np
    import nblog as nb
    run = nb.init("p", run_id=sys.argv[2], root=sys.argv[1], resume="auto", system=False,
                  _environ={"NB_HOSTNAME": "A"})
    for line in sys.stdin:
        if line.strip() == "end":
            break
        step = int(line)
        run.add_image("img", np.full((8, 8), step, np.uint8), step=step)
        run.flush()
        print("ok", flush=True)
    run.finish()
""")


def test_media_of_two_sessions_writing_at_once_on_a_and_b_stay_readable(mounts):
    """A preempted session on A still flushing its media while its restart on B has
    begun: both appended to one pack, and B's cached size of it (short by what A had
    just appended) gave B's blobs wrong offsets. Now each writes a pack of its own."""
    import numpy as np

    a, b = mounts()
    writer_a = subprocess.Popen([sys.executable, "-c", MEDIA_WRITER, str(a / "runs"), RID],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        def on_a(step: int) -> None:
            writer_a.stdin.write(f"{step}\n")
            writer_a.stdin.flush()
            assert writer_a.stdout.readline().strip() == "ok"

        on_a(1)
        run_b = start(b, "B")  # session 1, while session 0 still writes
        for step in range(2, 6):
            on_a(step)
            run_b.add_image("img", np.full((8, 8), 100 + step, np.uint8), step=100 + step)
            run_b.flush()
        writer_a.communicate("end\n", timeout=60)
    finally:
        if writer_a.poll() is None:
            writer_a.kill()
    run_b.finish()
    reader = nb.RunReader(a / "runs" / "p" / RID)
    media = reader.media("img")
    assert media["step"].to_list() == [1, 2, 3, 4, 5, 102, 103, 104, 105]
    for row in media.iter_rows(named=True):
        assert np.asarray(reader.image(row)).max() == row["step"]
