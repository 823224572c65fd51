"""Where one run's folder is: the root of runs (``$NB_DIR``) and a RUN argument (a path,
a run id, ``project/run id`` or a unique prefix of an id) resolved to one folder. What every
command that takes a RUN, and each view of one run, starts from; listing many runs is
``nblog.reader._runs.catalog``'s. Standard library only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..._errors import AmbiguousRunError, RunNotFoundError
from ...format._filenames import RUN_JSON, parse_event_file_name


def default_root(env: Mapping[str, str] | None = None) -> str:
    """The root folder: ``$NB_DIR``, else ``./nb_runs``."""
    env = os.environ if env is None else env
    return env.get("NB_DIR") or "nb_runs"


def _is_run_dir(path: str) -> bool:
    if os.path.isfile(os.path.join(path, RUN_JSON)):
        return True
    try:
        return any(parse_event_file_name(n) for n in os.listdir(path))
    except OSError:
        return False


def _has_control(s: str) -> bool:
    return any(ord(c) < 32 or 127 <= ord(c) < 160 for c in s)


def resolve_run(query: str | os.PathLike, root: str | os.PathLike | None = None) -> str:
    """Return the folder of the run ``query`` names.

    ``query`` is a path to a run folder, a run id, ``project/run id``, or a unique
    prefix of a run id, searched in ``<root>/*/``.

    Raises:
        RunNotFoundError: nothing matches (the message says where it looked).
        AmbiguousRunError: a prefix matches several runs (``.candidates``).
    """
    q = os.fspath(query)
    root = os.fspath(root) if root is not None else default_root()
    if not q or "\0" in q or _has_control(q):
        raise RunNotFoundError(q, root)
    if os.path.isdir(q) and _is_run_dir(q):
        return os.path.abspath(q)
    parts = q.split("/")
    if os.path.isabs(q) or ".." in parts or "\\" in q or len(parts) > 2 or "" in parts:
        raise RunNotFoundError(q, root)
    if len(parts) == 2:
        path = os.path.join(root, parts[0], parts[1])
        if os.path.isdir(path) and _is_run_dir(path):
            return os.path.abspath(path)
        project_dirs = [parts[0]]
        q = parts[1]
    else:
        try:
            project_dirs = sorted(os.listdir(root))
        except OSError:
            raise RunNotFoundError(q, os.path.abspath(root)) from None
    # The direct path of the id in each project first: a network file system may list
    # a folder from a cache that does not show a run created a moment ago elsewhere,
    # while a lookup of the name itself is answered by the server.
    exact = [p for p in (os.path.join(root, project, q) for project in project_dirs)
             if q != "." and os.path.isdir(p) and _is_run_dir(p)]
    if exact:
        project_dirs = []
    prefix = []
    for project in project_dirs:
        pdir = os.path.join(root, project)
        try:
            names = os.listdir(pdir)
        except OSError:
            continue
        for name in names:
            if name == q or name.startswith(q):
                path = os.path.join(pdir, name)
                if name != q and os.path.isdir(path) and _is_run_dir(path):
                    prefix.append(path)
    found = exact or prefix
    if not found:
        raise RunNotFoundError(q, os.path.abspath(root))
    if len(found) > 1:
        raise AmbiguousRunError(q, sorted(f"{os.path.basename(os.path.dirname(p))}/{os.path.basename(p)}" for p in found))
    return os.path.abspath(found[0])
