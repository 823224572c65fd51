"""``nb serve``'s live feed and run cache (nbcli/serve/_hub.py): what a chart request
reads after the feed announced new points, on an injected clock (no waiting, no timing)."""

from __future__ import annotations

from pathlib import Path

import nblog as nb
from nbcli.serve._hub import REFRESH_S, ServedRun


def test_a_chart_asked_for_after_the_feed_announced_points_has_them(tmp_path: Path) -> None:
    """The page fetches a chart again when the stream says a tag has new points. That
    answer must hold them, even when the run's points were refreshed less than
    REFRESH_S before (the feed and the charts read the files on their own schedules):
    otherwise the chart misses the job's last flush for good, no later event coming."""
    now = [0.0]
    run = nb.init("p", run_id="r-00000001", root=str(tmp_path), system=False)
    try:
        for step in range(5):
            run.add_scalar("loss", float(step), step=step)
        run.flush()
        served = ServedRun("r-00000001", run.dir, clock=lambda: now[0])
        feed = served.feed()
        seq, _ = feed.since(None)  # the stream opens: what is there is the chart's
        assert served.points("loss", 0)[0].tolist() == [0, 1, 2, 3, 4]
        now[0] += REFRESH_S  # a chart request: the run's files looked at again, nothing new
        assert served.points("loss", 0)[0].tolist() == [0, 1, 2, 3, 4]
        for step in range(5, 8):  # the job's last flush
            run.add_scalar("loss", float(step), step=step)
        run.flush()
        now[0] += REFRESH_S / 2  # the feed's own poll is due (its last was REFRESH_S * 1.5 ago)
        seq, events = feed.since(seq)
        assert [(e["tag"], e["step"]) for e in events] == [("loss", [5, 6, 7])]
        # the page asks for the chart again at once
        assert served.points("loss", 0)[0].tolist() == [0, 1, 2, 3, 4, 5, 6, 7]
    finally:
        run.finish()
