"""``nb resume-id PROJECT --latest`` without Typer: the newest run's id, and a parser of
the argument forms the entry point answers itself (:func:`nbcli.app._fast`), as
:mod:`nbcli._ls` does for ``nb ls``. :mod:`nbcli.commands.resume_id` declares the
command for Typer and calls :func:`print_latest`, so both paths run the same code."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence


def print_latest(project: str, name: str | None, root: str | None) -> int:
    """Print the id of the newest run of ``project`` (named ``name``; any when None)
    under ``root`` (default ``$NB_DIR``, else ``./nb_runs``) and a newline: exit code 0;
    or, when there is none, a message on stderr and nothing on stdout: 1."""
    from nblog.reader import default_root, latest_run

    root = root or default_root()
    rid = latest_run(root, project, name)
    if rid is None:
        from ._output import error

        what = f"project {project!r}" + (f" named {name!r}" if name is not None else "")
        error(f"no run of {what} under {os.path.abspath(root)}",
              "drop --latest to start a new run, or check --root / NB_DIR")
        return 1
    sys.stdout.write(rid + "\n")
    return 0


_VALUED = {"--name": "name", "-n": "name", "--root": "root"}


def fast_argv(argv: Sequence[str]) -> dict | None:
    """The :func:`print_latest` arguments for ``nb resume-id ARGV``, or None unless
    ``argv`` is PROJECT with ``--latest`` and at most ``--name``/``-n`` and ``--root``
    (a value as the next word or, for the long forms, after ``=``) and ``--``, with
    names that :func:`nblog.format.check_name` accepts. Everything else (``--job-id``,
    ``--help``, a usage error) is left to Typer; the last of a repeated option wins."""
    from nblog.format import check_name

    from ._argv import scan_argv

    scanned = scan_argv(argv, _VALUED, {"--latest": "latest"})
    if scanned is None:
        return None
    positional, pairs, seen = scanned
    opts: dict = {"name": None, "root": None}
    opts.update(pairs)  # the last of a repeated option wins
    latest = "latest" in seen
    if not latest or len(positional) != 1:
        return None
    for value, what in ((positional[0], "PROJECT"), (opts["name"], "--name")):
        if value is not None:
            try:
                check_name(value, what)
            except ValueError:
                return None
    return {"project": positional[0], "name": opts["name"], "root": opts["root"] or None}


__all__ = ["fast_argv", "print_latest"]
