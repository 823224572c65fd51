"""Media reaches the run only through the interface it owns (``media/_media.py``:
``MediaHost``), never through the run's private attributes and methods.

Before, ``MediaMixin`` was a base class of ``Run`` and read eight private attributes
and five private methods of it (``self._hi``, ``self._intern``, ``self._run._writer``...):
a change to Run's internals broke media without a line of media changing.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import numpy as np

import nblog as nb
import nblog.media
from nblog.media._media import MediaLog, MediaSink

MEDIA = Path(nblog.media.__file__).parent


def test_no_media_class_is_a_base_of_run():
    """Media code never runs with the run as its ``self``."""
    assert [c.__qualname__ for c in nb.Run.__mro__ if c.__module__.startswith("nblog.media")] == []


def test_media_touches_private_attributes_of_its_own_objects_only():
    """In ``nblog/media/``, a ``_``-prefixed attribute is only ever ``self._x``: the run
    (or anything else handed in) is used through public names only."""
    bad = []
    for path in sorted(MEDIA.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            where = f"{path.name}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                if not (isinstance(node.value, ast.Name) and node.value.id == "self"):
                    bad.append(f"{where}: {ast.unparse(node)}")
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) > 1
                    and isinstance(node.args[1], ast.Constant) and str(node.args[1].value).startswith("_")
                    and not str(node.args[1].value).startswith("__")):
                bad.append(f"{where}: {ast.unparse(node)}")
    assert bad == []


class Host:
    """The ``MediaHost`` interface and nothing of a Run: what media is allowed to need."""

    def __init__(self, folder: str | None = None) -> None:
        self.dir, self.rank, self.session = folder, 0, 0
        self.queued: list = []
        self.rejected: list = []
        self.counted: list = []
        self.warned: list = []

    def step(self, step, tag):
        return 5 if step is None else step

    def tag_id(self, tag):
        return {"h": 1, "img": 2}.get(tag)

    def tag(self, tid):
        return {1: "h", 2: "img"}[tid]

    def queue(self, step, tid, job):
        self.queued.append((step, tid, 0, job))

    def count(self, counter, n=1):
        self.counted.append((counter, n))

    def warn_once(self, key, message):
        self.warned.append(key)

    def reject(self, counter, tag, message):
        self.rejected.append((counter, tag))

    def internal(self, err):
        raise AssertionError(f"internal error: {err!r}")


def test_media_logs_and_encodes_through_its_host_alone(tmp_path):
    host = Host(str(tmp_path))
    media = MediaLog(host)
    media.add_histogram("h", [1.0, 2.0, 3.0])  # no step: the host's current step
    media.add_image("img", np.zeros((2, 3), np.uint8), step=9)
    media.add_image("img", np.zeros((0, 3), np.uint8), step=10)  # empty: bad media
    media.add_image("unknown", np.zeros((2, 3), np.uint8), step=11)  # the host refuses the tag
    assert [(step, tid, job.kind) for step, tid, _ms, job in host.queued] == [(5, 1, "histogram"), (9, 2, "array")]
    assert host.rejected == [("bad_media", "img")]

    refs = MediaSink(host)(host.queued)  # the writer thread's side
    assert [(step, tid) for step, tid, *_ in refs] == [(5, 1), (9, 2)]
    assert os.path.getsize(tmp_path / "media.r0.pack") >= sum(length for *_, length, _meta in refs)
    assert host.counted == [] and host.warned == []
