"""nb diff: golden text and JSON on runs written by real rank processes that differ in
config, world size and resume; exit codes (0 either way, --exit-code 1 when they
differ); data from the runs never reaches the terminal as controls or markup.

The goldens are tests/cli/golden/diff.txt and diff.json; times, durations, paths and
the nblog version are normalised before comparing (``NB_UPDATE_GOLDEN=1`` rewrites them).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from cli_helpers import run_ranks

import nblog

GOLDEN = Path(__file__).with_name("golden")
NOTE = "[bold]x[/] \x1b[2J"


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> Path:
    """cmp/base-00000001: 2 ranks on node-a, steps 0-19. cmp/wide-00000002: 3 ranks
    (node-a, node-a, node-b), another config, steps 0-19 then resumed at 10 (to 24)."""
    root = tmp_path_factory.mktemp("diff") / "runs"
    base = {"project": "cmp", "name": "base", "stop": 20,
            "config": {"optim": {"lr": 0.001, "name": "adam"}, "model": {"layers": [64, 64]}, "seed": 1,
                       "note": NOTE}}
    wide = {"project": "cmp", "name": "wide", "stop": 20, "nan": [3],
            "config": {"optim": {"lr": 0.0003, "name": "adam", "betas": [0.9, 0.95]}, "model": {"layers": [128]},
                       "note": NOTE + " wide"}}
    run_ranks(root, base, 2, "base-00000001", ["node-a", "node-a"])
    run_ranks(root, wide, 3, "wide-00000002", ["node-a", "node-a", "node-b"])
    run_ranks(root, {**wide, "start": 10, "stop": 25, "resume": "auto", "nan": []}, 3, "wide-00000002",
              ["node-a", "node-a", "node-b"])
    return root


_TIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")


def _normal_text(text: str) -> str:
    text = text.replace(nblog.__version__, "<version>")
    lines = []
    code = False  # in the Code section: commits, paths and versions of this machine
    for line in text.splitlines():
        cells = line.split("\t")
        code = line.startswith("# Code") or (code and line != "")
        if len(cells) > 2 and (cells[1] in ("started", "duration") or code):  # the DIFF mark too
            line = "\t".join(cells[:2] + ["<varies>"])
        lines.append(_TIME.sub("<time>", line))
    return "\n".join(lines) + "\n"


def _normal_json(info: dict, root: Path) -> dict:
    for r in info["runs"]:
        r["path"] = os.path.relpath(r["path"], root)
    for f in info["sessions"]["fields"]:
        if f["field"] in ("start", "duration_s"):
            f["values"] = ["<varies>" if v is not None else None for v in f["values"]]
            f["differs"] = "<varies>"
    for e in info["environment"]:
        e["values"] = ["<version>" if v == nblog.__version__ else v for v in e["values"]]
    for f in info["code"]["fields"]:  # commits, paths and versions of this machine
        f["values"] = ["<varies>"] * len(f["values"])
    info["code"]["packages"] = "<varies>"
    return info


def _golden(name: str, got: str) -> None:
    path = GOLDEN / name
    if os.environ.get("NB_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(got, encoding="utf-8")
    assert got == path.read_text(encoding="utf-8")


def test_text_golden(cli, pair):
    result = cli("diff", "base-0", "cmp/wide-00000002", "--root", str(pair))
    assert result.exit_code == 0, result.stderr
    assert "\x1b" not in result.stdout
    _golden("diff.txt", _normal_text(result.stdout))


def test_json_golden(cli, pair):
    result = cli("diff", "base-0", "wide-0", "--root", str(pair), "--json")
    assert result.exit_code == 0, result.stderr
    info = json.loads(result.stdout)
    assert info["differ"] is True
    _golden("diff.json", json.dumps(_normal_json(info, pair), indent=1, ensure_ascii=False) + "\n")


def test_what_the_json_says(cli, pair):
    info = json.loads(cli("diff", "base-0", "wide-0", "--root", str(pair), "--json").stdout)
    changes = {c["key"]: (c["change"], c["values"]) for c in info["config"]["changes"]}
    assert changes == {"model.layers": ("changed", [[64, 64], [128]]), "optim.betas": ("added", [None, [0.9, 0.95]]),
                       "optim.lr": ("changed", [0.001, 0.0003]), "seed": ("removed", [1, None]),
                       "note": ("changed", [NOTE, NOTE + " wide"])}
    assert info["config"]["equal"] == 1  # optim.name
    env = {e["field"]: e for e in info["environment"]}
    assert env["world_size"]["values"] == [2, 3] and env["world_size"]["differs"]
    assert env["machines"]["values"] == [1, 2] and env["hosts"]["values"] == ["node-a", "node-a, node-b"]
    assert info["sessions"]["count"] == [1, 2]
    loss = next(t for t in info["tags"]["common"] if t["tag"] == "train/loss")
    assert loss["last"] == [0.05, 0.04] and loss["step"] == [19, 24]
    assert loss["min"] == [0.05, 0.04] and loss["max"] == [1.0, 1.0]
    assert info["tags"]["only_some"] == []


def test_exit_codes(cli, pair):
    root = str(pair)
    assert cli("diff", "base-0", "wide-0", "--root", root).exit_code == 0
    assert cli("diff", "base-0", "wide-0", "--root", root, "--exit-code").exit_code == 1
    same = cli("diff", "base-0", "cmp/base-00000001", "--root", root, "--exit-code", "--json")
    assert same.exit_code == 0 and json.loads(same.stdout)["differ"] is False
    one = cli("diff", "base-0", "--root", root)
    assert one.exit_code == 2 and "at least two runs" in one.stderr
    missing = cli("diff", "base-0", "nosuch", "--root", root)
    assert missing.exit_code == 1 and "no run matches 'nosuch'" in missing.stderr
    assert "Traceback" not in missing.stderr + one.stderr


def test_three_runs(cli, pair):
    info = json.loads(cli("diff", "base-0", "wide-0", "base-0", "--root", str(pair), "--json").stdout)
    assert [r["label"] for r in info["runs"]] == ["A", "B", "C"]
    lr = next(c for c in info["config"]["changes"] if c["key"] == "optim.lr")
    assert lr["values"] == [0.001, 0.0003, 0.001]
    seed = next(c for c in info["config"]["changes"] if c["key"] == "seed")
    assert seed["change"] == "removed" and seed["present"] == [True, False, True]


def test_terminal_output_is_escaped(cli, pair):
    result = cli("diff", "base-0", "wide-0", "--root", str(pair), env={"FORCE_COLOR": "1", "COLUMNS": "200"})
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "\x1b[2J" not in out and "\\x1b[2J" in out  # the config note, shown, not acted on
    assert "[bold red]x[/]" in out and "[bold]x[/]" in out  # tags and values printed, never parsed as markup
