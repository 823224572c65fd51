"""Options and arguments shared by several commands, declared once."""

from __future__ import annotations

from typing import Annotated

import typer

from ._damage import allow

Root = Annotated[
    str | None,
    typer.Option(
        "--root",
        envvar="NB_DIR",
        metavar="DIR",
        help="Folder holding the projects [default: $NB_DIR, else ./nb_runs].",
        show_default=False,
        show_envvar=True,
    ),
]
Json = Annotated[bool, typer.Option("--json", help="Print JSON (stable keys, null for missing, units in key names).")]
RunArg = Annotated[
    str,
    typer.Argument(
        metavar="RUN",
        help="A run id, a unique prefix of one, PROJECT/RUN_ID, or a path to a run folder.",
        show_default=False,
    ),
]
MAX_RANK = 2**31 - 1  # ranks are Int32 columns
MAX_COUNT = 2**63 - 1  # steps and counts: int64, and what a C ssize_t holds

Rank = Annotated[int, typer.Option("--rank", "-r", min=0, max=MAX_RANK, metavar="K", help="The rank to read.")]
Tags = Annotated[
    list[str] | None,
    typer.Option(
        "--tag",
        "-t",
        metavar="GLOB",
        help="Only tags matching this shell-style glob (*, ?, [...]); repeat for several.",
        show_default=False,
    ),
]
FollowTimeout = Annotated[
    float | None,
    typer.Option("--timeout", min=0, metavar="SECONDS",
                 help="With -f: stop following after SECONDS and exit 0 [default: never].",
                 show_default=False),
]
PollInterval = Annotated[
    float, typer.Option("--interval", min=0.01, metavar="SECONDS", help="With -f: seconds between polls.")
]
AllowDamaged = Annotated[
    bool,
    typer.Option("--allow-damaged", callback=allow,
                 help="Exit 0 even when damaged bytes of an event log were skipped (exit status 3 "
                      "otherwise); each damaged range is reported on stderr either way."),
]
