"""Terminal safety (SPEC §8: output that comes from logged data is escaped: never
interpreted as terminal control sequences or as Rich markup).

One run logged through the API carries hostile tags, text, config values, a run and
project name with Rich markup and a host name with escape sequences; a second run has
a forged run.json (names with ESC, C1 and bidi controls) and event-log frames whose
bytes are not UTF-8. Every ``nb`` command that prints logged data, piped and on a
(forced) terminal, and every view of the TUI must show all of it inert: no raw ESC,
CSI (C1), OSC, bidi override or isolate, carriage return, and markup printed as the
characters it is made of.
"""

from __future__ import annotations

import json
import os
import re
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import nblog as nb
from nbcli.app import app
from nblog.format import _format as F

HOSTILE = [
    "\x1b[31mred\x1b[0m",  # SGR
    "\x1b[2J\x1b[H",  # clear the screen
    "\x1b]0;pwned title\x07",  # OSC: set the window title
    "\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\",  # OSC 8 hyperlink
    "\x9b31mc1-csi",  # C1 CSI
    "over\rwrite",  # carriage return
    "\u202eevil\u202c",  # bidi override
    "\u2066isolate\u2069",  # bidi isolate
    "[bold red]markup[/]",  # Rich markup
    "[link=https://evil.example]click[/link]",
    "back\bspace\x07bell\x00nul",
]
MARKUP = "[bold red]markup[/]"
# what must never reach a terminal raw: ESC, C1 controls, bidi controls, CR, BEL, BS, NUL
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def inert(output: str, terminal: bool = False) -> None:
    text = output
    if terminal:  # nb's own styling is SGR: take out exactly those, then nothing may remain
        text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    bad = RAW.findall(text)
    assert not bad, (bad[:5], output[:2000])
    for raw in ("\x1b]0;pwned title", "\x1b]8;;https://evil", "\x1b[31mred", "\x1b[2J", "\x1b[5m", "\x1b[H"):
        assert raw not in output, (raw, output[:2000])  # hostile sequences, also among nb's own SGR


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("term") / "runs"
    env = {"NB_HOSTNAME": "node\x1b[31m-1\u202e"}
    run = nb.init("[red]proj", run_name="[bold]name", run_id="hostile-00000001", root=root,
                  config={h: h for h in HOSTILE} | {"nested": {"k": HOSTILE}}, system=["cpu"],
                  system_interval=0.05, _environ=env)
    for step in range(5):
        run.add_scalar({f"tag/{i}{h}": step + i for i, h in enumerate(HOSTILE)}, step=step)
        with run.timer("timer" + HOSTILE[0]):
            pass
        run.add_text("text" + HOSTILE[1], "\n".join(HOSTILE), step=step)
        run.add_image("img" + HOSTILE[2], np.zeros((2, 2), np.uint8), step=step, caption="cap" + HOSTILE[3])
    run.finish()
    forged = root / "[red]proj" / "forged-00000002"
    forged.mkdir()
    (forged / "run.json").write_text(json.dumps({
        "id": "forged-00000002", "project": "\x1b[2Jproj", "name": "\x9b31mname\u202e\x1b]0;pwned title\x07",
        "status": "running\x1b[5m", "config": {"x\x1b[31m": "\u2066y"}, "sessions": [], "hosts": ["h\x1b[0m"],
    }))
    log = F.file_header() + F.json_frame(F.FRAME_SESSION, {"host": "h\x1b[31m", "local_rank": 0, "wall_start": 0})
    bad = b"\xff\xfe\x1b[31m\xc3"  # not UTF-8, with an ESC inside
    log += F.frame(F.FRAME_TAGS, struct.pack("<IBI", 0, F.KIND_TEXT, len(bad)) + bad)
    log += F.frame(F.FRAME_TAGS, struct.pack("<IBI", 1, F.KIND_TEXT, 1) + b"t")
    log += F.frame(F.FRAME_TEXT, struct.pack("<qIII", 0, 1, 0, len(bad)) + bad)
    log += F.frame(F.FRAME_TEXT, struct.pack("<qIII", 0, 1, 0, 5) + b"fine\x1b")
    (forged / "events.r0.s0.log").write_bytes(log)
    assert zlib.crc32(log)  # written
    return root


COMMANDS = [
    ["ls"], ["ls", "--json"],
    ["show", "hostile-00000001"], ["show", "hostile-00000001", "--json"],
    ["tail", "hostile-00000001", "-n", "100"], ["tail", "hostile-00000001", "-n", "100", "--json"],
    ["tail", "hostile-00000001", "--rank", "0", "--system", "-n", "5"],
    ["timers", "hostile-00000001"], ["timers", "hostile-00000001", "--json"],
    ["media", "hostile-00000001"], ["media", "hostile-00000001", "--json"],
    ["show", "forged-00000002"], ["show", "forged-00000002", "--json"],
    ["tail", "forged-00000002"], ["tail", "forged-00000002", "--json"],
    ["show", "\x1b[31mnothing"], ["tail", "\x9bnothing"],  # errors echo the argument
]


@pytest.mark.parametrize("terminal", [False, True], ids=["piped", "terminal"])
@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c).encode("unicode_escape").decode() for c in COMMANDS])
def test_nb_shows_logged_data_inert(root, command, terminal):
    env = {k: None for k in os.environ if k.startswith(("NB_", "FORCE_COLOR", "NO_COLOR"))}
    env.update({"COLUMNS": "300", "FORCE_COLOR": "1" if terminal else None})
    res = CliRunner().invoke(app, [*command, "--root", str(root)], env=env)
    # forged-00000002 has frames that do not decode: reported, and exit 3 (nbcli._damage)
    assert res.exit_code in ((0, 1, 3) if "forged-00000002" in command else (0, 1)), res.output
    if "forged-00000002" in command:
        assert res.exit_code == 3 and "damaged at bytes" in res.stderr, res.output
    assert "Traceback" not in res.output and "internal error" not in res.output, res.output
    inert(res.stdout, terminal)
    inert(res.stderr, terminal)
    if res.exit_code == 0 and command[:2] == ["show", "hostile-00000001"] and "--json" not in command:
        assert MARKUP in res.stdout  # markup printed as its characters
    if "--json" in command and res.exit_code in (0, 3):
        json.loads(res.stdout) if command[0] != "tail" else [json.loads(ln) for ln in res.stdout.splitlines()]


def test_the_forged_files_never_read_as_something_else(root):
    r = nb.RunReader(root / "[red]proj" / "forged-00000002")
    assert r.text()["text"].to_list() == ["fine\x1b"]  # the bytes that were not UTF-8: skipped
    assert r.sessions()[0]["skipped_bytes"] > 0


def test_the_tui_shows_logged_data_inert(root):
    import asyncio

    from nbcli.tui.app import NbTui

    def screen_text(app) -> str:
        return "\n".join(strip.text for strip in app.screen._compositor.render_strips())

    async def main() -> list[str]:
        seen = []
        app = NbTui(root=str(root), poll_s=0)
        async with app.run_test(size=(160, 50)) as pilot:
            for _ in range(3):
                await pilot.pause()
                await app.workers.wait_for_complete()
            seen.append(screen_text(app))  # the runs screen: both runs, forged names
            for target in ("hostile-00000001", "forged-00000002"):
                app2 = NbTui(runs=[str(root / "[red]proj" / target)], poll_s=0)
                async with app2.run_test(size=(160, 50)) as p2:
                    for key in ("1", "2", "3", "4", "1"):
                        await p2.press(key)
                        for _ in range(3):
                            await p2.pause()
                            await app2.workers.wait_for_complete()
                        seen.append(screen_text(app2))
                    from nbcli.tui.widgets.tagtree import TagTree

                    tree = app2.screen.query_one(TagTree)
                    for tag in list(tree.tags)[:4]:
                        tree.toggle(tag)
                    for _ in range(3):
                        await p2.pause()
                        await app2.workers.wait_for_complete()
                    seen.append(screen_text(app2))
        return seen

    screens = asyncio.run(main())
    joined = "\n".join(screens)
    inert(joined)
    assert "\\x1b" in joined  # shown, as a visible escape
    assert "[bold]name" in joined or "[red]proj" in joined  # markup as characters
