"""Helpers shared by the media tests (a module of its own: every test folder has a
conftest, so ``from conftest import ...`` would find another folder's)."""

from __future__ import annotations

import nblog as nb


def read_back(run) -> nb.RunReader:
    """Finish ``run`` and open a reader on its folder."""
    run.finish()
    return nb.RunReader(run.dir)


def dropped(run) -> dict:
    """The dropped counters of the run's session, as a reader sees them."""
    (session,) = [s for s in nb.RunReader(run.dir).sessions() if s["session"] == run.session]
    return session["dropped"]
