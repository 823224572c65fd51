"""A finished event log changed under a reader that already read it, on a local disk:
truncated (a mapped page past the new end is a SIGBUS that kills the reader) or
overwritten in place (bytes decoded from a mapping after their checksums were checked
would be values that were never written). The reader keeps what it read and verified.

These need no FUSE: they run in the default suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent("""
    import os, sys
    import nblog as nb
    root, how = sys.argv[1], sys.argv[2]
    run = nb.init("p", run_id="trunc-00000001", root=root, system=False, _environ={})
    for step in range(300_000):  # about 7 MiB: a large finished log
        run.add_scalar("loss", step * 0.5, step=step)
    run.finish()
    path = os.path.join(run.dir, "events.r0.s0.log")
    reader = nb.RunReader(run.dir)
    reader.files(0)  # read and checksummed now
    size = os.path.getsize(path)
    if how == "truncate":
        os.truncate(path, 0)
    else:  # overwrite every byte after the first 4 KiB in place
        with open(path, "r+b") as f:
            f.seek(4096)
            f.write(bytes([0x55]) * (size - 4096))
    values = reader.scalars()["value"].to_list()
    assert values == [s * 0.5 for s in range(300_000)], "values that were never written"
    print("ok", len(values))
""")


def _run(tmp_path, how: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CHILD, str(tmp_path), how], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONFAULTHANDLER": "1"})


def test_a_read_log_truncated_under_the_reader_does_not_crash_it(tmp_path):
    res = _run(tmp_path, "truncate")
    assert res.returncode == 0, f"reader died (rc {res.returncode}): {res.stderr[-2000:]}"
    assert res.stdout.split() == ["ok", "300000"]


def test_a_read_log_overwritten_in_place_returns_only_what_was_written(tmp_path):
    res = _run(tmp_path, "overwrite")
    assert res.returncode == 0, f"rc {res.returncode}: {res.stderr[-2000:]}"
    assert res.stdout.split() == ["ok", "300000"]


def test_a_resume_that_cannot_read_run_json_keeps_the_run_history(tmp_path, caplog):
    """run.json unreadable at a resume (a stale cache cut the read short, a torn copy):
    the history comes back from run.json.bak and the event logs' headers, with a
    warning, instead of a run.json written afresh."""
    import json

    import nblog as nb

    def start():
        return nb.init("p", run_id="hist-00000001", root=str(tmp_path), config={"lr": 0.1},
                       resume="auto", system=False, _environ={"NB_HOSTNAME": "hostA"})

    for step in range(2):  # sessions 0 and 1: session 1's resume leaves run.json.bak
        run = start()
        run.add_scalar("x", 1.0, step=step)
        run.finish()
    path = tmp_path / "p" / "hist-00000001" / "run.json"
    created = json.loads(path.read_text())["created"]
    path.write_text(json.dumps(json.loads(path.read_text()))[:100])  # cut short
    run = start()
    run.finish()
    meta = json.loads(path.read_text())
    assert [s["session"] for s in meta["sessions"]] == [0, 1, 2]
    assert meta["created"] == created and meta["config"] == {"lr": 0.1} and meta["hosts"] == ["hostA"]
    assert "unreadable" in caplog.text


def test_a_rank_that_gives_up_waiting_names_the_caches_and_nb_wait_s(tmp_path, caplog):
    import nblog as nb

    env = {"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "NB_RUN_ID": "late-00000001",
           "NB_WAIT_S": "0.1", "NB_DIR": str(tmp_path)}
    run = nb.init("p", system=False, _environ=env)
    assert run.dir is None
    assert "negative_timeout" in caplog.text and "dir_cache" in caplog.text and "NB_WAIT_S=300" in caplog.text


def test_pack_check_counts_a_live_sessions_unseen_media_apart_from_missing_media(tmp_path):
    """nb show warned "records point past the end of their pack" for a healthy live run
    whose pack this machine saw short; a session still writing has them "not visible
    yet", and only a session that ended has them missing."""
    import numpy as np

    import nblog as nb
    from nblog.reader._runfiles.media import pack_check

    run = nb.init("p", run_id="media-00000001", root=str(tmp_path), system=False, _environ={})
    for step in range(3):
        run.add_image("img", np.zeros((4, 4), np.uint8), step=step)
    run.flush()
    pack = os.path.join(run.dir, "media.r0.pack")
    full = os.path.getsize(pack)
    os.truncate(pack, full - 10)  # as a cached size short by the last append shows it
    check = pack_check(nb.RunReader(run.dir), 0)
    assert (check["records"], check["missing"], check["not_visible"]) == (3, 0, 1)
    run.finish()
    check = pack_check(nb.RunReader(run.dir), 0)
    assert (check["missing"], check["not_visible"]) == (1, 0)
    assert check["size_bytes"] == full - 10 and check["files"] == [{"file": "media.r0.pack", "size_bytes": full - 10}]


def test_a_media_record_is_read_from_its_own_sessions_pack(tmp_path):
    """Two sessions' packs hold blobs at equal offsets and lengths: each record's bytes
    come from its session's pack, and a record without its session is refused when the
    reference is ambiguous rather than answered with another record's image."""
    import numpy as np
    import pytest

    import nblog as nb

    for value in (7, 9):
        run = nb.init("p", run_id="packs-00000001", root=str(tmp_path), resume="auto", system=False, _environ={})
        run.add_image("img", np.full((4, 4), value, np.uint8), step=value)
        run.finish()
    assert sorted(n for n in os.listdir(run.dir) if n.endswith(".pack")) == ["media.r0.pack", "media.r0.s1.pack"]
    reader = nb.RunReader(run.dir)
    rows = list(reader.media().iter_rows(named=True))
    assert [(r["session"], r["offset"]) for r in rows] == [(0, 28), (1, 28)]
    assert [int(np.asarray(reader.image(r)).max()) for r in rows] == [7, 9]
    if rows[0]["length"] == rows[1]["length"]:
        with pytest.raises(ValueError, match="pass its session"):
            reader.media_bytes({k: rows[1][k] for k in ("rank", "offset", "length", "kind")})
