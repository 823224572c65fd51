"""A run's provenance files (``provenance.r<rank>.s<session>.json``: command, code,
versions), read back as records, by rank then session: what ``nb show``, ``nb diff`` and
the report show of what ran. Standard library only.
"""

from __future__ import annotations

import os

from ...format._filenames import parse_provenance_file_name
from ...format._runfile import read_json_file

#: A provenance file larger than this is not read (they are tens of KiB).
MAX_PROVENANCE_BYTES = 16 << 20


def provenance(run_dir: str) -> list[dict]:
    """The provenance records of a run (``provenance.r<rank>.s<session>.json``), by rank
    then session, each with ``file`` added; a file that is not a JSON object is skipped."""
    try:
        names = os.listdir(run_dir)
    except OSError:
        return []
    out = []
    for name in names:
        rs = parse_provenance_file_name(name)
        if rs is None:
            continue
        path = os.path.join(run_dir, name)
        try:
            if os.stat(path).st_size > MAX_PROVENANCE_BYTES:
                continue
        except OSError:
            continue
        obj, _st = read_json_file(path)
        if obj is None:
            continue
        obj["rank"], obj["session"], obj["file"] = rs[0], rs[1], name
        out.append(obj)
    out.sort(key=lambda o: (o["rank"], o["session"]))
    return out


__all__ = ["MAX_PROVENANCE_BYTES", "provenance"]
