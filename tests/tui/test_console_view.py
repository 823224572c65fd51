"""The Console view (key 6): the selected rank's captured stdout/stderr, last lines
first read, then followed on each poll; logged bytes escaped, stderr styled apart,
a note for a rank that captured nothing. Console files are written in the documented
line format (nb-format(5), CONSOLE FILES) with fixed times."""

from __future__ import annotations

import os

import pytest
from nbtui_helpers import aio, settle
from nbtui_synth import RUN_ID, WALL0
from textual.widgets import RichLog

from nbcli.tui.app import NbTui
from nbcli.tui.screens.run import CONSOLE_LINES, RunScreen
from nbcli.tui.widgets.plot import BraillePlot

pytestmark = pytest.mark.timing  # run again beside a CPU hog: scripts/test_loaded.sh


def console_file(run_dir: str, rank: int, session: int, lines) -> str:
    path = os.path.join(run_dir, f"console.r{rank}.s{session}.log")
    with open(path, "ab") as f:
        for t, step, stream, text in lines:
            f.write(f"{WALL0 + t:.3f}\t{'-' if step is None else step}\t{stream}\t".encode() + text + b"\n")
    return path


LINES = [
    (0.5, None, "o", b"starting training"),
    (1.0, 0, "o", b"step 0 loss 2.5"),
    (2.0, 1, "e", b"NCCL WARN something \x1b[31mred\x1b[0m \x07"),
    (3.0, 2, "o", b"[bold]not markup[/bold]"),
    (4.0, 3, "!", b"nb: 2 lines (40 bytes) of console output are missing here: test"),
]


def log_lines(app) -> list[str]:
    return [strip.text for strip in app.screen.query_one("#console-log", RichLog).lines]


def log_styles(app, needle: str) -> set[str]:
    log = app.screen.query_one("#console-log", RichLog)
    for strip in log.lines:
        if needle in strip.text:
            return {str(seg.style.color.name) for seg in strip if seg.style and seg.style.color and needle in seg.text}
    return set()


@pytest.fixture
def console_run(demo_run):
    console_file(demo_run, 0, 1, LINES)
    return demo_run


@aio
async def test_console_view_shows_escapes_and_follows(demo_root, console_run):
    app = NbTui(root=demo_root, runs=[console_run], poll_s=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("6")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunScreen) and screen.view == "console"
        text = "\n".join(log_lines(app))
        assert "starting training" in text and "step 0 loss 2.5" in text
        assert "[bold]not markup[/bold]" in text  # literal, never parsed as markup
        assert "\x1b" not in text and "\x07" not in text  # control bytes shown escaped
        assert "\\x1b[31mred" in text
        assert "missing here" in text
        assert log_styles(app, "NCCL") == {"#ff8787"}  # stderr apart from stdout
        assert log_styles(app, "starting") == set()
        # followed live: an appended line appears on the next poll, nothing shown twice
        console_file(console_run, 0, 1, [(5.0, 4, "o", b"a new line")])
        screen.poll()
        await settle(pilot)
        lines = log_lines(app)
        assert sum("a new line" in s for s in lines) == 1
        assert sum("starting training" in s for s in lines) == 1
        # another rank: its own console, or the note when it captured none
        await pilot.press("right_square_bracket")
        await settle(pilot)
        lines = log_lines(app)
        assert screen.rank == 1
        assert lines == ["rank 1 captured no console (init(console=True) or NB_CONSOLE=1)"]


@aio
async def test_console_view_keeps_only_the_last_lines(demo_root, demo_run):
    n = CONSOLE_LINES + 500
    console_file(demo_run, 0, 1, [(i * 0.001, i, "o", f"line {i}".encode()) for i in range(n)])
    app = NbTui(root=demo_root, runs=[demo_run], poll_s=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("6")
        await settle(pilot)
        lines = log_lines(app)
        assert len(lines) == CONSOLE_LINES
        assert lines[-1].endswith(f"line {n - 1}") and lines[0].endswith(f"line {n - CONSOLE_LINES}")


def test_console_snapshot(snap_compare, demo_root, console_run):
    async def go(pilot):
        await settle(pilot)
        await pilot.press("6")
        await settle(pilot)

    app = NbTui(root=demo_root, runs=[console_run], poll_s=0)
    app.animation_level = "none"
    assert snap_compare(app, terminal_size=(100, 30), run_before=go)


def add_event(run_dir: str, rank: int, session: int, event: dict, ms: int = 1000) -> None:
    """Append a STATS frame carrying ``event`` (as the writer records failures and alerts)."""
    from nblog.format import _format as F

    with open(os.path.join(run_dir, f"events.r{rank}.s{session}.log"), "ab") as f:
        f.write(F.json_frame(F.FRAME_STATS, {"ms": ms, "event": event}))


FAILURE = {"kind": "failure", "type": "RuntimeError", "message": "CUDA out of memory\nsecond line",
           "traceback": "Traceback ...", "step": 150, "wall": WALL0 + 3800.0, "ms": 1000}
ALERT = {"kind": "alert", "title": "loss \x1b[2Jspike", "text": "[red]3.2x[/red] the median", "level": "warn",
         "step": 120, "wall": WALL0 + 3750.0, "ms": 900, "suppressed": 0}


@aio
async def test_alerts_in_header_console_and_plots(demo_root, demo_run):
    add_event(demo_run, 3, 1, FAILURE)
    add_event(demo_run, 0, 1, ALERT)
    app = NbTui(root=demo_root, runs=[demo_run], poll_s=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        screen = app.screen
        head = str(screen.query_one("#run-header").render())
        assert "1 failure" in head and "1 alert" in head
        # marked on the plot at their steps (x axis: step)
        plot = screen.query_one("#plots").query(BraillePlot).first()
        assert plot._alerts == ((120.0, 150.0), "!")
        assert "!" in "".join(plot.render_line(y).text for y in range(plot.size.height))
        # listed above the console: time, rank, step, level, title, message; escaped
        await pilot.press("6")
        await settle(pilot)
        box = str(screen.query_one("#alerts").render())
        assert "rank 0  step 120  warn  loss \\x1b[2Jspike: [red]3.2x[/red] the median" in box
        assert "rank 3  step 150  error  RuntimeError: CUDA out of memory" in box
        assert box.index("step 120") < box.index("step 150")  # by time
        assert "\x1b" not in box
        # a new alert is read on the next poll (only what was appended)
        add_event(demo_run, 2, 1, dict(ALERT, title="late", step=190, wall=WALL0 + 3900.0))
        screen.poll()
        await settle(pilot)
        assert "2 alerts" in str(screen.query_one("#run-header").render())
        # another x axis than the step: no marks
        screen.action_cycle_axis()
        await settle(pilot)
        assert screen.axis != "step"
        assert all(p._alerts[0] == () for p in screen.query_one("#plots").query(BraillePlot))


@aio
async def test_no_events_no_count(demo_root, demo_run):
    app = NbTui(root=demo_root, runs=[demo_run], poll_s=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        head = str(app.screen.query_one("#run-header").render())
        assert "alert" not in head and "failure" not in head
        assert not app.screen.query_one("#alerts").display


@pytest.mark.parametrize("view", ["1", "6"], ids=["plots", "console"])
def test_alerts_snapshot(snap_compare, demo_root, console_run, view):
    add_event(console_run, 3, 1, FAILURE)
    add_event(console_run, 0, 1, ALERT)

    async def go(pilot):
        await settle(pilot)
        await pilot.press(view)
        await settle(pilot)

    app = NbTui(root=demo_root, runs=[console_run], poll_s=0)
    app.animation_level = "none"
    assert snap_compare(app, terminal_size=(100, 30), run_before=go)


@aio
async def test_runs_list_marks_a_failed_run(demo_root, demo_run):
    import json

    from textual.widgets import DataTable, Input

    path = os.path.join(demo_run, "run.json")
    with open(path) as f:
        meta = json.load(f)
    meta["status"] = "failed"
    meta["sessions"][-1]["failure"] = {"rank": 0, "type": "RuntimeError", "message": "CUDA out of memory",
                                       "step": 150, "wall": WALL0 + 3800.0}
    with open(path, "w") as f:
        json.dump(meta, f)
    app = NbTui(root=demo_root, poll_s=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(DataTable)
        marks = {str(table.get_row_at(i)[1]): str(table.get_row_at(i)[0]) for i in range(table.row_count)}
        assert marks == {RUN_ID: "✗", "demo-1111beef": " "}
        app.screen.query_one("#runs-filter", Input).value = "runtimeerror"
        await settle(pilot)
        assert table.row_count == 1 and str(table.get_row_at(0)[1]) == RUN_ID


REAL = """
import os, sys
import nblog as nb
run = nb.init("real", run_id="console-00000001", root=sys.argv[1], system=False, console=True)
for step in range(3):
    run.add_scalar("loss", 1.0 / (step + 1), step=step)
    print("training step", step, flush=True)
os.write(2, b"C-level \\x1b[31mwarning\\x1b[0m on fd 2\\n")
run.alert("loss spike", "3x the median", "warning")
raise RuntimeError("boom at the end")
"""


@aio
async def test_console_and_failure_of_a_real_process(tmp_path):
    """A real nb.init(console=True) process: its stdout, a C-level write to fd 2 and its
    uncaught exception reach the Console view, the alert and the failure the header."""
    import subprocess
    import sys

    root = str(tmp_path / "runs")
    proc = subprocess.run([sys.executable, "-c", REAL, root], capture_output=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if not k.startswith("NB_")})
    assert proc.returncode == 1 and b"boom at the end" in proc.stderr
    run_dir = os.path.join(root, "real", "console-00000001")
    app = NbTui(root=root, runs=[run_dir], poll_s=0)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        head = str(app.screen.query_one("#run-header").render())
        assert "1 failure" in head and "1 alert" in head
        await pilot.press("6")
        await settle(pilot)
        text = "\n".join(log_lines(app))
        assert all(f"training step {s}" in text for s in range(3))
        assert "C-level \\x1b[31mwarning\\x1b[0m on fd 2" in text
        assert log_styles(app, "C-level") == {"#ff8787"}  # fd 2: stderr
        assert "RuntimeError: boom at the end" in text  # the traceback nb echoes to stderr
        box = str(app.screen.query_one("#alerts").render())
        assert "error  RuntimeError: boom at the end" in box and "warn  loss spike: 3x the median" in box
        rendered = app.screen.query_one("#alerts").render()
        assert {str(sp.style) for sp in rendered.spans if rendered.plain[sp.start:sp.end] == "warn"} == {"ansi_yellow"}


def write_hang_dumps(run_dir: str, world: int, behind: int) -> None:
    """Stall dumps of ``world`` ranks made by the real watchdog code (injected clock and
    Flight Recorder records): rank ``behind`` one collective behind the others."""
    from nblog.write import _hang as H

    def record(seq: int):
        entries = [{"pg_id": 0, "pg": "default_pg", "seq": s, "op": "gloo:all_reduce",
                    "state": "completed" if s < seq else "scheduled", "raw_state": "scheduled", "p2p": False,
                    "sizes": [[4]]} for s in range(1, seq + 1)]
        return lambda: ({"version": "2.10", "pg_status": {}, "pg_config": {}, "entries": entries}, None)

    for rank in range(world):
        now = [10.0]
        dog = H.Watchdog(run_dir, rank, 1, f"h{rank}", lambda: 150, hang_s=5, signum=None, faulthandler=False,
                         clock=lambda now=now: now[0], wall=lambda now=now: WALL0 + now[0],
                         record=record(5 if rank == behind else 6))
        dog.poll()
        now[0] += 5
        dog.poll()


@aio
async def test_a_hang_is_named_in_the_header(demo_root, demo_run):
    """The stall line of ``nb show`` (the hang dumps: ``hang_summary``) in the run header,
    naming the rank the others wait for; gone when the run is not stalled."""
    app = NbTui(root=demo_root, runs=[demo_run], poll_s=0)
    async with app.run_test(size=(160, 30)) as pilot:
        await settle(pilot)
        assert "hung since" not in str(app.screen.query_one("#run-header").render())
        write_hang_dumps(demo_run, 4, behind=2)
        app.screen.poll()
        await settle(pilot)
        head = str(app.screen.query_one("#run-header").render())
        assert "hung since" in head and "at step 150; suspects rank 2" in head, head
