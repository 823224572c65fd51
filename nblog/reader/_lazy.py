"""A module imported on the first use of one of its names, for the reader modules whose
common path does without it (``RunReader.scalars`` builds its frame with Polars alone, so
a first read does not wait ~60 ms for numpy). Not put in ``sys.modules``: other code
that imports the module gets the real one, and Polars never sees a stand-in.
"""

from __future__ import annotations

import importlib


class LazyModule:
    """Stands for the module ``name``: the first attribute asked for imports it, and each
    attribute is then kept here (later uses are plain attribute reads)."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str) -> object:
        value = getattr(importlib.import_module(self._name), attr)
        setattr(self, attr, value)
        return value


numpy = LazyModule("numpy")
