"""nbcli: the ``nb`` command — inspect, tail, export and resume runs logged with nblog.

Every subcommand is a thin layer over the ``nblog`` reader library: parse the
arguments, make one or two library calls, format the result (``nbcli._output``).
``nbcli`` imports ``nblog``, never the reverse.
"""

from __future__ import annotations

from nblog import __version__

__all__ = ["__version__"]
