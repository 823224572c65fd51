"""Framework doors (Lightning, Transformers, Accelerate, SummaryWriter) with the real frameworks."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.timeout(300))
