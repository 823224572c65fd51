"""The HTML of ``nb report``: one file with the page's data, styles and scripts inlined.

One concern: putting the dict of :mod:`._data` into ``template.html`` with uPlot
(``vendor/``, fetched from npm by ``scripts/vendor_js.sh``) and the page's own
``report.js`` / ``report.css``. Nothing is fetched when the page opens: there is no
``src=`` or ``href=`` to anything but the page itself, and a Content-Security-Policy
forbids every request (images are ``data:`` URIs).
"""

from __future__ import annotations

import html
import re
from importlib import resources

from .._output import json_text

_SLOT = re.compile(r"@@([A-Z_]+)@@")


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def script_json(obj: object) -> str:
    """``obj`` as JSON that is safe inside ``<script type="application/json">``: non-finite
    floats as strings (:func:`nbcli._output.json_text`), and ``<``, ``>``, ``&`` escaped
    so no logged text can close the script element."""
    text = json_text(obj, indent=None)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _inline_script(code: str) -> str:
    # a vendored script must not end its own element early
    return re.sub(r"</(script)", r"<\\/\1", code, flags=re.IGNORECASE)


def render(data: dict, title: str) -> str:
    """The report page for ``data`` (from :func:`nbcli.report._data.build`).

    Args:
        data: the page's data.
        title: the page's title (escaped here).
    """
    slots = {
        "TITLE": html.escape(title),
        "VERSION": html.escape(str(data.get("nb_version", ""))),
        "UPLOT_CSS": _asset("vendor/uPlot.min.css"),
        "CSS": _asset("report.css"),
        "DATA": script_json(data),
        # uPlot's MIT licence travels with every copy of the file
        "UPLOT_JS": _inline_script("/*\n" + _asset("vendor/LICENSE.uPlot").replace("*/", "* /") + "*/\n"
                                   + _asset("vendor/uPlot.iife.min.js")),
        "JS": _inline_script(_asset("report.js")),
    }
    return _SLOT.sub(lambda m: slots[m.group(1)], _asset("template.html"))
