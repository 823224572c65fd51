"""``nb watch`` on a run where a rank died without an END record (``kill -9``) after the
others ended: the rule ``unended`` (real rank processes and real ``nb`` processes)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from _gapkit import TIMEOUT_S, done, nb_cli, start


def test_watch_names_a_rank_killed_after_the_others_ended(tmp_path: Path) -> None:
    """Ranks 0 and 2 finish; rank 1 is killed with SIGKILL after them: its session has
    no END record. ``nb watch --once`` says so and exits 1; following, it says so once
    and stops following (the run is over), instead of waiting for rank 1 forever."""
    root, rid = tmp_path / "runs", f"kill-{uuid.uuid4().hex[:8]}"
    held = start(root, 1, 3, "hold", rid, host="node1")
    for r in (0, 2):
        assert done(start(root, r, 3, "finish", rid))[0] == 0
    assert held.stdout.readline() == "ready\n"
    held.kill()
    held.wait(timeout=TIMEOUT_S)

    # nb watch runs on the ranks' machine (named node1 here, as the ranks name it)
    once = nb_cli("watch", rid, "--once", "--json", root=root, NB_HOSTNAME="node1")
    assert once.returncode == 1, once.stderr
    (alert,) = [json.loads(x) for x in once.stdout.splitlines()]
    assert (alert["rule"], alert["level"], alert["rank"], alert["session"], alert["step"], alert["host"]) == \
        ("unended", "error", 1, 0, 5, "node1"), alert
    assert alert["message"] == "rank 1 (node1) session 0 ended without an END record (killed? last step 5)"
    assert isinstance(alert["wall_time"], float)

    follow = nb_cli("watch", rid, "--json", "--interval", "0.2", "--timeout", "60", root=root, NB_HOSTNAME="node1")
    assert follow.returncode == 1, follow.stderr  # an alert was reported, as with --once
    assert [json.loads(x)["rule"] for x in follow.stdout.splitlines()] == ["unended"]
    assert "finished; 1 alert" in follow.stderr, follow.stderr  # done, not timed out


def test_watch_waits_for_a_rank_that_is_still_alive(tmp_path: Path) -> None:
    """Rank 1 has not ended but its process lives (blocked, as in a collective after a
    peer failed): no unended alert while it lives."""
    root, rid = tmp_path / "runs", f"live-{uuid.uuid4().hex[:8]}"
    held = start(root, 1, 2, "hold", rid)
    try:
        assert done(start(root, 0, 2, "finish", rid))[0] == 0
        assert held.stdout.readline() == "ready\n"
        once = nb_cli("watch", rid, "--once", "--json", root=root, NB_HOSTNAME="node1")
        assert (once.returncode, once.stdout) == (0, ""), once.stdout
    finally:
        held.kill()
        held.wait(timeout=TIMEOUT_S)


def test_watch_once_lists_the_first_failure_first_not_rank_by_rank(tmp_path: Path) -> None:
    """Rank 3 raises first, ranks 0-2 after it: one poll's alerts come in the order their
    data happened (they came rank by rank: rank 0's later failure before rank 3's)."""
    root, rid = tmp_path / "runs", f"order-{uuid.uuid4().hex[:8]}"
    late = [start(root, r, 4, "hold_raise", rid) for r in (0, 1, 2)]
    for p in late:
        assert p.stdout.readline() == "ready\n"
    assert done(start(root, 3, 4, "raise", rid))[0] == 1
    for p in late:
        assert done(p)[0] == 1

    once = nb_cli("watch", rid, "--once", "--json", root=root, NB_HOSTNAME="node1")
    assert once.returncode == 1, once.stderr
    failures = [a for a in map(json.loads, once.stdout.splitlines()) if a["rule"] == "failure"]
    assert [a["rank"] for a in failures][0] == 3, failures
    assert sorted(a["rank"] for a in failures) == [0, 1, 2, 3]
    walls = [a["wall_time"] for a in failures]
    assert walls == sorted(walls), walls
