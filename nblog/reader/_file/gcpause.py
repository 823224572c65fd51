"""Bulk reads without the cyclic garbage collector: reading every rank's logs of a run,
or listing thousands of runs, makes many small objects, none in a cycle, which the
collector would scan again and again. Standard library only.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """No cyclic garbage collection inside (restored after, unless it was off before):
    listing 20,000 runs makes hundreds of thousands of small lists and dicts, none of
    them in a cycle, and the collector scanning them again and again costs a tenth of
    ``nb ls``, a fifth of ``nb ls --where``."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
