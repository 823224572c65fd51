"""``nb serve``: a live web page of every run and every rank, and its JSON API.

- :mod:`._hub` — the runs served (:class:`~._hub.Catalog`: ids looked up, never joined to
  paths) and each one's points kept up to date (:class:`~._hub.ServedRun` over
  :class:`nblog.reader.LiveRun`; :class:`~._hub.Feed` of new points for streams).
- :mod:`._api` — the JSON API and the event streams (``man nb-serve``).
- :mod:`._security` — the token gate and the headers of every answer.
- :mod:`._app` — the Starlette application: routes, the page and its files.
- ``serve.html``, ``serve.js``, ``serve.css`` — the page: the runs table and the views
  of selected runs, drawn by ``nb report``'s ``report.js`` (one chart code base).

Starlette and uvicorn are the optional extra ``nblog[serve]``, imported only here.
"""
