"""``nb tui [RUN|PROJECT]``: the live terminal UI (``nbcli.tui``)."""

from __future__ import annotations

import os
from enum import Enum
from typing import Annotated

import typer

from .. import _damage as damage
from .._options import AllowDamaged, Root


class Images(str, Enum):
    """How images are drawn (``nbcli.tui.widgets.picture.IMAGE_MODES``, not imported here)."""

    auto = "auto"
    kitty = "kitty"
    sixel = "sixel"
    halfblock = "halfblock"


def tui(
    target: Annotated[
        str | None,
        typer.Argument(metavar="[RUN|PROJECT]", help="A run (id, prefix, PROJECT/RUN_ID, path) or a project.",
                       show_default=False),
    ] = None,
    root: Root = None,
    allow_damaged: AllowDamaged = False,
    interval: Annotated[
        float,
        typer.Option("--interval", "-i", min=0.1, metavar="SECONDS", envvar="NB_TUI_INTERVAL",
                     help="Seconds between reads of new data.", show_envvar=True),
    ] = 1.0,
    images: Annotated[
        Images,
        typer.Option("--images", envvar="NB_TUI_IMAGE", show_envvar=True, case_sensitive=False,
                     help="How the media view draws images (auto: Kitty or Sixel graphics where the terminal "
                          "is known to draw them, else half blocks)."),
    ] = Images.auto,
    group: Annotated[
        str | None,
        typer.Option("--group", "-g", metavar="KEY",
                     help="Group runs by this flattened config key (optim.lr): the runs opened together are "
                          "drawn as each group's mean with the min-max band of its runs (ctrl+g in the runs "
                          "screen).", show_default=False),
    ] = None,
) -> None:
    """Browse runs in a terminal UI: tag tree, live plots, ranks, timers, system metrics, text, media.

    RUN opens that run; PROJECT opens the runs screen with that project's runs; nothing
    opens every run under the root. Press ? inside for the keys, q to quit.
    """
    from nblog.reader import default_root, resolve_run

    root = root or default_root()
    if target is None and not os.path.isdir(root):  # as nb ls: nothing to show, ever, until it is made
        from .._output import error

        where = os.path.abspath(root)
        error(f"no runs: {where} {'is not a folder' if os.path.exists(where) else 'does not exist'}",
              "pass --root DIR or set NB_DIR")
        raise typer.Exit(1)
    runs: list[str] = []
    project = None
    if target is not None:
        if _is_project(root, target):
            project = target
        else:
            runs = [resolve_run(target, root)]  # errors reach nb's error boundary
    # damaged bytes read while Textual owns the terminal: a notification each, and the warning
    # lines once the terminal is restored (the exit status is nb's rule: nbcli._damage)
    damage.hold()
    try:
        lives = None
        if runs:  # read the run while Textual imports and starts
            from ..tui.preload import start

            lives = start(runs)
        from ..tui.app import NbTui

        app = _reporting(NbTui)(root=root, runs=runs, project=project, poll_s=interval, image_mode=images.value,
                                lives=lives, group=group)
        damage.listen(lambda line: app.notify(line, title="damaged event log: bytes skipped", severity="warning",
                                              timeout=30, markup=False))
        app.run()
    finally:
        damage.release()
    if app.failure is not None:  # the terminal is restored: nb's error boundary reports it
        raise app.failure
    if app.return_code:
        raise typer.Exit(app.return_code)


def _reporting(base: type) -> type:
    """``base`` (a Textual ``App`` class) made to keep the first exception that stops it
    in ``failure`` instead of printing Textual's traceback on exit. ``nb tui`` raises it
    after ``run()`` returns, so a crash at start (an unreadable stylesheet) or later
    reaches nb's error boundary: ``error: ...`` and exit 1, the traceback with
    ``--debug``. The two methods overridden are Textual's own hooks for this
    (``_handle_exception``, ``_print_error_renderables``); tests/packaging checks them.
    """

    class Reporting(base):
        failure: BaseException | None = None

        def _handle_exception(self, error: Exception) -> None:
            if self.failure is None:
                self.failure = error
            super()._handle_exception(error)

        def _print_error_renderables(self) -> None:
            if self.failure is None:
                super()._print_error_renderables()
            else:
                self._exit_renderables.clear()

    # Textual finds CSS_PATH beside the module that defines the app class: keep base's
    Reporting.__module__, Reporting.__name__, Reporting.__qualname__ = base.__module__, base.__name__, base.__qualname__
    return Reporting


def _is_project(root: str, name: str) -> bool:
    """A project: a folder directly under the root that is not itself a run."""
    from nblog.format import RUN_JSON

    if not name or "/" in name or name in (".", "..") or os.path.isdir(name) and os.path.exists(os.path.join(name, RUN_JSON)):
        return False
    path = os.path.join(root, name)
    return os.path.isdir(path) and not os.path.exists(os.path.join(path, RUN_JSON))


def register(app: typer.Typer) -> None:
    app.command("tui")(tui)
