"""How a screen asks for another: the App (:class:`nbcli.tui.app.NbTui`) owns navigation,
and a screen never imports another screen. A screen calls these methods on ``self.app``,
seen through :func:`navigator` so that the type checker knows them."""

from __future__ import annotations

from typing import Protocol, cast


class Navigator(Protocol):
    """The navigation methods of the App."""

    def open_runs(self, paths: list[str], group: str | None = None) -> None:
        """Push the run screen of the run folders ``paths``."""

    def show_runs_of(self, root: str) -> None:
        """Replace the current screen by the runs screen of ``root``."""


def navigator(app: object) -> Navigator:
    """``app`` (a screen's ``self.app``) as the :class:`Navigator` it is."""
    return cast(Navigator, app)
