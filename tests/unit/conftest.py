"""Fixtures for in-process unit tests: runs in a temporary root, a clean environment.

``init`` takes the environment as ``_environ=``, so no test reads or patches
``os.environ``; system metrics are off unless a test asks for them.
"""

from __future__ import annotations

import pytest

import nblog as nb


@pytest.fixture
def root(tmp_path):
    return tmp_path / "runs"


@pytest.fixture
def make_run(root):
    """``make_run(project="p", env={}, **init_kwargs)`` → a Run, finished after the test."""
    runs = []

    def make(project="p", env=None, **kwargs):
        kwargs.setdefault("system", False)
        kwargs.setdefault("provenance", False)  # tested on its own (test_provenance)
        run = nb.init(project, root=root, _environ=dict(env or {}), **kwargs)
        runs.append(run)
        return run

    yield make
    for run in runs:
        run.finish()
