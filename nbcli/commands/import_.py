"""``nb import tensorboard LOGDIR``: TensorBoard event files as nb runs (one per folder)."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from nblog.reader.lowlevel import plural

from .._options import Root
from .._output import clean, error, info

import_app = typer.Typer(
    name="import",
    help="Bring runs logged by other tools into nb.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@import_app.command("tensorboard")
def tensorboard(
    logdir: Annotated[
        str,
        typer.Argument(metavar="LOGDIR", help="TensorBoard's --logdir: every folder under it holding event files "
                                             "becomes one nb run (the rank folders of nb's own export: one run "
                                             "together).", show_default=False),
    ],
    project: Annotated[
        str | None,
        typer.Option("--project", "-p", metavar="PROJECT",
                     help="The nb project the runs go into [default: nb's export keeps its own; other event "
                          "files go into 'tensorboard'].", show_default=False),
    ] = None,
    update: Annotated[
        bool,
        typer.Option("--update", help="For folders imported before: add the records written since, as new "
                                      "sessions (without it, such folders are reported and left as they are)."),
    ] = False,
    root: Root = None,
) -> None:
    """Import TensorBoard event files: scalars, text, images and histograms with their own
    steps and wall times; a SummaryWriter(purge_step=) restart becomes a new session.

    Run names are the folders' paths relative to LOGDIR ('/' written '.'); the path is
    kept in each run's config as tensorboard_logdir. What nb export --format tfevents
    wrote comes back as one run: its project, name, config, ranks, sessions and timers.
    Exit 0 when every folder was imported or is up to date, 1 when LOGDIR holds no event
    files or a folder was imported before (without --update), 2 for a usage error.
    """
    from nblog.format import check_name
    from nblog.reader import default_root

    if project is not None:
        try:
            check_name(project, "--project")
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--project") from None
    if not os.path.exists(logdir):
        raise typer.BadParameter(f"{clean(logdir)!r} does not exist", param_hint="LOGDIR")
    if not os.path.isdir(logdir):
        raise typer.BadParameter(f"{clean(logdir)!r} is not a folder", param_hint="LOGDIR")
    try:
        import tensorboard as _tb  # noqa: F401
    except ImportError:
        error("reading event files needs the tensorboard package", 'pip install "nblog[tensorboard]"')
        raise typer.Exit(1) from None
    from nblog.tensorboard import AlreadyImported, import_source, import_sources

    sources = import_sources(logdir)
    if not sources:
        error(f"no TensorBoard event files (*tfevents*) under {clean(logdir)}",
              "LOGDIR is the folder given to tensorboard --logdir")
        raise typer.Exit(1)
    root = root or default_root()
    refused = 0
    for source in sources:
        into = project or source.project or "tensorboard"
        try:
            res = import_source(source, into, root, update=update)
        except AlreadyImported as exc:
            refused += 1
            error(f"{clean(_shown(source.path, logdir))}: already imported as {clean(exc.run_dir)}",
                  "pass --update to add the points written since")
            continue
        name = source.name or res["run_id"]
        if not res["sessions"] and not os.path.isdir(res["run_dir"]):
            info(f"{clean(name)}: nothing nb can hold (no scalars, text, images or histograms); no run made")
            continue
        if not res["sessions"]:
            info(f"{clean(name)}: up to date ({clean(res['run_dir'])})")
            continue
        sessions = plural(res["sessions"], "session")
        if source.export is None:
            what = f"{sessions}, {plural(res['scalars'], 'scalar')}"
        else:
            what = (f"nb export of {clean(str(source.export.get('project')))}/{clean(str(source.export.get('id')))}: "
                    f"{plural(res['ranks'], 'rank')}, {sessions}, {plural(res['scalars'], 'scalar')}, "
                    f"{plural(res['timers'], 'timer')}")
        info(f"{clean(name)} -> {clean(into)}/{res['run_id']}: {what}, {plural(res['texts'], 'text')}, "
             f"{plural(res['media'], 'image/histogram', 'images/histograms')}")
    if refused:
        raise typer.Exit(1)


def _shown(path: str, logdir: str) -> str:
    """``path`` relative to ``logdir`` (LOGDIR as given for itself; absolute outside it)."""
    rel = os.path.relpath(path, os.path.abspath(logdir))
    return logdir if rel == "." else path if rel.startswith("..") else rel


def register(app: typer.Typer) -> None:
    app.add_typer(import_app, name="import")
