"""This machine's name as nblog records it (``run.json``'s sessions and hosts, each event
log's session header, failure marks) and as readers compare it, to tell whether the
process that wrote a session ran on the machine they run on."""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing is not imported: `import nblog` stays light
if TYPE_CHECKING:
    from collections.abc import Mapping


def hostname(env: Mapping[str, str]) -> str:
    """This machine's name; ``NB_HOSTNAME`` in ``env`` overrides it (for tests simulating
    machines)."""
    name = env.get("NB_HOSTNAME")
    if name:
        return name
    if hasattr(os, "uname"):
        return os.uname().nodename
    import socket

    return socket.gethostname()
