"""``nb ls`` on an 80-column terminal: a run id (what people copy) is never wrapped."""

from __future__ import annotations

import io
import time

from rich.console import Console

from nbcli import _ls
from nbcli._output import Output


def test_run_ids_stay_whole_on_80_columns() -> None:
    now = time.time()
    ids = [f"20261201-2215{i:02d}-late-45c0db2{i}" for i in range(3)]
    rows = [{"id": rid, "project": "myproject", "name": "a-longish-run-name", "status": "running", "ranks": 8,
             "sessions": 2, "last_step": 313006, "last_step_updated": now - 4, "started": now - 3600,
             "duration_s": 3600.0} for rid in ids]
    buf = io.StringIO()
    console = Console(file=buf, width=80, force_terminal=True, color_system=None, highlight=False,
                      soft_wrap=False, emoji=False, markup=False)
    Output(console).table(_ls._COLUMNS, (_ls._default_cells(r, now) for r in rows))
    lines = buf.getvalue().splitlines()
    assert all(len(line) <= 80 for line in lines)
    for rid in ids:
        assert sum(rid in line for line in lines) == 1, buf.getvalue()
