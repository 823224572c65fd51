"""Damaged event logs: never silent, and one damaged byte costs little.

A run is written by nblog in a real process; single bytes of its event log are then
flipped, as a bad disk sector or a bad copy would. Every reader and command must say which
rank, file, byte range and (where known) how many points it left out, and the commands
whose output lacks them exit 3 unless ``--allow-damaged``; a flipped byte costs at most
``F.FRAME_POINTS_MAX`` points of one rank, and nothing at all in the frames written twice
(the session header, tag definitions) or in the file header.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest
from hardkit import clean_env

import nblog as nb
from nblog.format import _format as F
from nblog.reader._file.logfile import LogFile

RUN = "dmg-00000001"
CODE = "from nbcli.app import main; main()"


def write_run(root: Path, steps: int, run_id: str = RUN, flush_every: int = 0) -> Path:
    """A finished run of ``steps`` steps (two scalars and a timer a step), written by nblog
    in a real process; returns its rank 0 event log."""
    script = textwrap.dedent(f"""
        import nblog
        run = nblog.init("p", root={str(root)!r}, run_id={run_id!r}, system=False, console=False,
                         provenance=False)
        for step in range({steps}):
            run.add_scalar({{"train/loss": 1.0 / (step + 1), "train/lr": 0.1}}, step=step)
            with run.timer("time/step", step=step):
                pass
            if {flush_every} and step % {flush_every} == {flush_every} - 1:
                run.flush()
        run.finish()
    """)
    subprocess.run([sys.executable, "-c", script], check=True, env=clean_env(), timeout=300)
    return root / "p" / run_id / "events.r0.s0.log"


def frames(data: bytes) -> list[tuple[int, int, int]]:
    """``(start, kind, stop)`` of each frame of a sound event log."""
    out, pos = [], F.FILE_HEADER.size
    while pos < len(data):
        _magic, kind, length, _crc, _hcrc = F.FRAME_HEADER.unpack_from(data, pos)
        stop = pos + F.FRAME_HEADER_SIZE + length
        out.append((pos, kind, stop))
        pos = stop
    return out


def flip(path: Path, at: int, original: bytes) -> None:
    data = bytearray(original)
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def nb_cmd(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CODE, *args], capture_output=True, text=True, env=clean_env(),
                          timeout=300)


def points_read(run_dir: Path) -> tuple[int, list[nb.DamagedLogWarning]]:
    """Scalar and timer points RunReader reads, and the damage warnings it issued."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", nb.DamagedLogWarning)
        r = nb.RunReader(run_dir)
        n = r.scalars().height + r.timers().height
    return n, [w.message for w in seen if isinstance(w.message, nb.DamagedLogWarning)]


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> tuple[Path, bytes]:
    """The issue's case: a finished run of 600 points (300 steps x 2 scalars) and 300 timers."""
    root = tmp_path_factory.mktemp("dmg")
    log = write_run(root, 300)
    return log, log.read_bytes()


def middle_of_the_points(data: bytes) -> int:
    (start, _kind, stop), *_ = [f for f in frames(data) if f[1] == F.FRAME_COLUMNS]
    return (start + stop) // 2


def test_the_library_warns_where_and_how_much(small):
    log, original = small
    at = middle_of_the_points(original)
    flip(log, at, original)
    try:
        r = nb.RunReader(log.parent)
        with pytest.warns(nb.DamagedLogWarning) as seen:
            assert r.scalars().height == 0  # the only points frame of this small run
        (w,) = [w.message for w in seen]
        assert (w.rank, w.session, w.path, w.frame, w.points, w.lost) == (0, 0, str(log), "points", 900, True)
        assert w.start <= at < w.stop
        assert f"bytes {w.start}-{w.stop}" in str(w) and "900 points left out" in str(w) and str(log) in str(w)
        assert r.damage() == [{"rank": 0, "session": 0, "path": str(log), "start": w.start, "stop": w.stop,
                               "bytes": w.stop - w.start, "frame": "points", "points": 900, "lost": True}]
    finally:
        log.write_bytes(original)


@pytest.mark.parametrize("command", [["export", "-o", "{out}/x.csv"], ["tail"], ["timers"], ["show"]])
def test_every_command_says_so_and_exits_3_unless_allowed(small, tmp_path, command):
    log, original = small
    flip(log, middle_of_the_points(original), original)
    try:
        args = [a.format(out=tmp_path) for a in command]
        res = nb_cmd(args[0], RUN, "--root", str(log.parents[2]), *args[1:])
        assert res.returncode == 3, res.stderr
        assert "Traceback" not in res.stderr
        assert f"warning: rank 0 session 0: {log}: " in res.stderr
        assert "900 points left out" in res.stderr and "--allow-damaged" in res.stderr
        allowed = nb_cmd(args[0], RUN, "--root", str(log.parents[2]), *args[1:], "--allow-damaged")
        assert allowed.returncode == 0, allowed.stderr
        assert "900 points left out" in allowed.stderr  # still said
    finally:
        log.write_bytes(original)


def test_tail_of_a_finished_damaged_rank_does_not_say_yet(small):
    log, original = small
    flip(log, middle_of_the_points(original), original)
    try:
        res = nb_cmd("tail", RUN, "--root", str(log.parents[2]))
        assert res.returncode == 3
        assert "no readable events in rank 0" in res.stderr and "yet" not in res.stderr
    finally:
        log.write_bytes(original)


def test_a_sound_log_says_nothing_and_exits_0(small):
    log, _original = small
    for args in (["export", RUN, "-o", "-", "-F", "csv"], ["timers", RUN], ["show", RUN]):
        res = nb_cmd(*args, "--root", str(log.parents[2]))
        assert res.returncode == 0 and "damaged" not in res.stderr, res.stderr


def test_the_frames_written_twice_lose_nothing(small):
    """Each byte of the session header and the tag definitions, and of the file header,
    flipped in turn: every point is read, the damage is reported as costing nothing, and
    the commands exit 0."""
    log, original = small
    doubled = [(a, b) for a, kind, b in frames(original) if kind in F.DOUBLED_FRAMES]
    assert [kind for _a, kind, _b in frames(original)][:4] == [F.FRAME_SESSION] * 2 + [F.FRAME_TAGS] * 2
    positions = [0, 3, 4, 6] + [p for a, b in doubled for p in (a, a + 3, a + 5, a + 13, a + 16, (a + b) // 2, b - 1)]
    try:
        for at in positions:
            flip(log, at, original)
            n, seen = points_read(log.parent)
            assert n == 900, at
            assert seen and all(not w.lost for w in seen), (at, [str(w) for w in seen])
            assert all("nothing lost" in str(w) for w in seen)
        res = nb_cmd("export", RUN, "--root", str(log.parents[2]), "-o", "-", "-F", "csv")
        assert res.returncode == 0 and "nothing lost" in res.stderr
    finally:
        log.write_bytes(original)


def test_one_flipped_byte_costs_at_most_one_frame_of_points(tmp_path):
    """A long run (66,000 points in flushes of 16,500) with one byte flipped at 150 places
    across its log: at most F.FRAME_POINTS_MAX points are lost, every loss is reported,
    and where the frame header survived, the count reported is the count lost. A point
    costs at most 16 bytes of log."""
    log = write_run(tmp_path, 22_000, flush_every=5_500)
    original = log.read_bytes()
    total = 66_000
    assert len(original) / total <= 16
    points_frames = [f for f in frames(original) if f[1] == F.FRAME_COLUMNS]
    assert len(points_frames) >= total // F.FRAME_POINTS_MAX
    first_points = points_frames[0][0]
    positions = range(first_points, len(original) - 200, (len(original) - 200 - first_points) // 150)
    for at in positions:
        flip(log, at, original)
        n, seen = points_read(log.parent)
        lost = total - n
        assert lost <= F.FRAME_POINTS_MAX, at
        if lost:
            assert any(w.lost for w in seen), at
            if all(w.points is not None for w in seen if w.lost):
                assert sum(w.points for w in seen if w.lost) == lost, (at, [str(w) for w in seen])
    log.write_bytes(original)


def test_points_of_a_lost_tag_definition_are_counted(tmp_path):
    """A log of the earlier layout (one copy of each TAGS frame), its TAGS frame damaged:
    the points of its tags cannot be named and are left out, counted in the warning."""
    recs = b"".join(F.POINT.pack(i, float(i), i % 3, i) for i in range(10_000))
    head = F.file_header() + F.json_frame(F.FRAME_SESSION, {"rank": 0, "format_version": F.FORMAT_VERSION})
    tags = F.frame(F.FRAME_TAGS, F.encode_tag_defs([(0, F.KIND_SCALAR, "a"), (1, F.KIND_SCALAR, "b"),
                                                    (2, F.KIND_TIMER, "t")]))
    data = bytearray(head + tags + F.point_frames(recs) + F.json_frame(F.FRAME_END, {"status": "finished"}))
    data[len(head) + F.FRAME_HEADER_SIZE + 2] ^= 0x10
    path = tmp_path / "events.r0.s0.log"
    path.write_bytes(bytes(data))
    lf = LogFile(str(path))
    with pytest.warns(nb.DamagedLogWarning, match="10000 points of the tags it defined left out"):
        lf.poll()
    (d,) = lf.damage
    assert (d.start, d.stop, d.frame, d.points, d.recovered) == (len(head), len(head) + len(tags),
                                                                 "tag definitions", 10_000, False)


@pytest.mark.timing
@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (scripts/smoke_wheel.sh installs it)")
def test_nb_tui_shows_the_damage_and_exits_3(small):
    """In a real terminal (tmux): a notification names the damage while the viewer runs,
    the warning line is printed once the terminal is restored, and the status is 3."""
    log, original = small
    flip(log, middle_of_the_points(original), original)
    session = f"nbdmg{os.getpid()}"
    tmux = shutil.which("tmux")

    def screen() -> str:
        return subprocess.run([tmux, "capture-pane", "-p", "-J", "-t", session], capture_output=True,
                              text=True).stdout

    def wait_for(text: str) -> None:
        deadline = time.monotonic() + 120
        while text not in screen():
            assert time.monotonic() < deadline, f"{text!r} not seen; screen:\n{screen()}"
            time.sleep(0.2)

    try:
        cmd = " ".join(f"'{a}'" for a in [sys.executable, "-c", CODE, "tui", RUN, "--root", str(log.parents[2])])
        subprocess.run([tmux, "new-session", "-d", "-s", session, "-x", "160", "-y", "40",
                        "-e", f"PYTHONPATH={clean_env()['PYTHONPATH']}", "-e", "TERM=xterm-256color",
                        f"{cmd}; echo nb-exit=$?; sleep 60"], check=True)
        wait_for("damaged event log")
        subprocess.run([tmux, "send-keys", "-t", session, "q"], check=True)
        wait_for("nb-exit=")
        after = screen()
        assert "nb-exit=3" in after and "900 points left out" in after, after
    finally:
        subprocess.run([tmux, "kill-session", "-t", session], capture_output=True)
        log.write_bytes(original)
