"""When a job goes wrong on a rank other than 0, or outside the main thread, or code
changed between runs: what ``nb ls``, ``nb show``, ``nb report``, ``nb watch`` and
``nb diff`` say (real rank processes with the variables torchrun gives its workers,
tests/integration/_scripts/gap_rank.py; real ``nb`` processes).
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

from _gapkit import done, nb_cli, start

import nblog as nb


def test_a_failure_on_rank_1_makes_ls_show_and_report_say_failed(tmp_path: Path) -> None:
    """Rank 0 finished cleanly; rank 1 (on host7) raised, then rank 2 raised after it:
    run.json (rank 0's) says finished, yet the run failed, and every listing says so."""
    root, rid = tmp_path / "runs", f"fail-{uuid.uuid4().hex[:8]}"
    assert done(start(root, 0, 3, "finish", rid))[0] == 0
    assert done(start(root, 1, 3, "raise", rid, host="host7"))[0] == 1
    assert done(start(root, 2, 3, "raise", rid, host="host9"))[0] == 1
    line = "failed: rank 1 (host7), step 5, ValueError: bad batch on rank 1 (1 other rank failed after it)"

    ls = nb_cli("ls", "--json", root=root)
    assert ls.returncode == 0, ls.stderr
    (row,) = json.loads(ls.stdout)
    assert row["status"] == "failed", row
    assert (row["failure"]["rank"], row["failure"]["host"], row["failure"]["step"]) == (1, "host7", 5), row
    assert row["failure_line"] == line and row["failed_after"] == 1, row
    plain = nb_cli("ls", root=root)
    assert plain.returncode == 0 and "\tfailed\t" in plain.stdout and plain.stderr == "", plain
    tty = nb_cli("ls", root=root, FORCE_COLOR="1", COLUMNS="200")  # on a terminal: the line below the table
    assert tty.returncode == 0 and f"{rid}: {line}" in tty.stderr, tty.stderr
    assert [r["id"] for r in json.loads(nb_cli("ls", "--status", "failed", "--json", root=root).stdout)] == [rid]

    show = nb_cli("show", rid, root=root)
    assert show.returncode == 0, show.stderr
    assert "status\tfailed\n" in show.stdout, show.stdout
    assert line in show.stdout
    assert json.loads(nb_cli("show", rid, "--json", root=root).stdout)["run"]["status"] == "failed"

    page = tmp_path / "report.html"
    rep = nb_cli("report", rid, "-o", str(page), root=root)
    assert rep.returncode == 0, rep.stderr
    m = re.search(r'<script type="application/json" id="nb-data">(.*?)</script>', page.read_text(), re.S)
    (info,) = json.loads(m.group(1))["runs"]
    assert (info["status"], info["failure"]) == ("failed", line), (info["status"], info.get("failure"))


def test_a_clean_run_and_a_rank_0_failure_are_listed_as_before(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    ok, bad = f"ok-{uuid.uuid4().hex[:8]}", f"bad-{uuid.uuid4().hex[:8]}"
    for r in (0, 1):
        assert done(start(root, r, 2, "finish", ok))[0] == 0
    assert done(start(root, 0, 1, "raise", bad))[0] == 1
    rows = {r["id"]: r for r in json.loads(nb_cli("ls", "--json", root=root).stdout)}
    assert (rows[ok]["status"], rows[ok]["failure"], rows[ok]["failure_line"]) == ("finished", None, None)
    assert rows[bad]["status"] == "failed"
    assert rows[bad]["failure_line"] == "failed: rank 0 (node1), step 5, ValueError: bad batch on rank 0"


def test_an_exception_in_a_thread_is_recorded_as_a_failure(tmp_path: Path) -> None:
    root, rid = tmp_path / "runs", f"thread-{uuid.uuid4().hex[:8]}"
    code, _out, err = done(start(root, 0, 1, "thread", rid))
    assert code == 0, err
    # the hooks before nb's still ran: the user's, then Python's own report
    assert "user hook saw ValueError in loader" in err
    assert "Exception in thread loader" in err and "ValueError: worker died" in err
    (run_dir,) = (root / "gap").iterdir()
    (f,) = nb.RunReader(run_dir).failures().to_dicts()
    assert (f["rank"], f["session"], f["step"], f["type"], f["message"]) == (0, 0, 3, "ValueError", "worker died")
    assert f["traceback"].rstrip().endswith("ValueError: worker died") and "in work" in f["traceback"]
    assert f["thread"] == "loader"
    # the main thread went on and finished; the run had a failure all the same
    assert nb.RunReader(run_dir).scalars("x")["step"].to_list() == list(range(6))
    (row,) = json.loads(nb_cli("ls", "--json", root=root).stdout)
    assert row["status"] == "failed"
    assert row["failure_line"] == "failed: rank 0 (node1), step 3, ValueError: worker died (thread loader)"
