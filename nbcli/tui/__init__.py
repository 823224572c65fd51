"""``nb tui``: a live Textual terminal viewer for every rank of a job.

Layout after Textualize's toolong / frogmouth: ``app.py`` (small), ``screens/``,
``widgets/``, ``messages.py``, one stylesheet ``nb.tcss``. Reading happens in thread
workers over :class:`nblog.reader._views.live.LiveRun` (only appended bytes are read); numeric
work for display (EMA, min/max downsampling, bands) is :mod:`nbcli.series`.

The app is ``nbcli.tui.app.NbTui``. This package imports nothing itself, so that
``nbcli.tui.preload`` can start reading a run before Textual is imported.
"""
