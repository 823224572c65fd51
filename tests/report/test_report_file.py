"""``nb report``'s file without a browser: self-contained, escaped, bounded, and the
usage errors (CliRunner; the runs are written by real rank processes)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from report_helpers import SPIKE_VALUE
from typer.testing import CliRunner

from nbcli.app import app
from nbcli.report import _data

pytestmark = pytest.mark.timing  # run again beside a CPU hog: scripts/test_loaded.sh


def nb(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200", "NB_DIR": None})


def page_data(html: str) -> dict:
    m = re.search(r'<script type="application/json" id="nb-data">(.*?)</script>', html, re.S)
    assert m
    return json.loads(m.group(1))


@pytest.fixture(scope="module")
def page(report_runs, tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("page") / "r.html"
    res = nb("report", "spike-00000001", "other-00000002", "--root", str(report_runs), "-o", str(out))
    assert res.exit_code == 0, res.output
    assert f"wrote {out}" in res.stderr
    return out.read_text(encoding="utf-8")


def test_nothing_is_loaded_from_outside_the_file(page):
    assert not re.search(r"<(script|link|img|iframe)[^>]*\s(src|href)=", page, re.I)
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert "uPlot" in page and "nb-data" in page
    assert "cdn" not in page.lower().replace("cdnjs", "")


def test_logged_text_cannot_close_the_script(page):
    # the text "<script>alert(1)</script> & done" is inside the JSON, escaped
    assert "<script>alert(1)</script>" not in page
    data = page_data(page)
    texts = [r["text"] for run in data["runs"] for r in run["text"]["rows"]]
    assert "<script>alert(1)</script> & done" in texts


def test_long_series_are_buckets_with_the_spike(page):
    data = page_data(page)
    (loss,) = [c for c in data["charts"] if c["tag"] == "train/loss"]
    assert loss["bucketed"] and len(loss["x"]) <= _data.MAX_BUCKETS
    spike = next(s for s in loss["series"] if s["run"] == "spike-00000001")
    assert max(v for v in spike["hi"] if v is not None) == SPIKE_VALUE
    assert spike["points"] == 3000 and spike["nonfinite_total"] == 2
    for s in loss["series"]:
        assert len(s["line"]) == len(s["lo"]) == len(s["hi"]) == len(loss["x"])


def test_runs_config_sessions_system_and_images(page):
    data = page_data(page)
    ids = [r["id"] for r in data["runs"]]
    assert ids == ["spike-00000001", "other-00000002"]
    spike = data["runs"][0]
    assert ["lr", 0.001] in spike["config"] and ["model.width", 64] in spike["config"]
    assert spike["world_size"] == 4 and spike["ranks"] == [0, 1, 2, 3]
    assert [s["session"] for s in spike["sessions"]] == [0]
    (machine,) = spike["system"]
    assert machine["hostname"] == "node-a" and machine["rank"] == 0
    metrics = {c["metric"] for c in machine["charts"]}
    assert {"cpu_percent", "memory_percent"} <= metrics
    (img,) = spike["images"]["rows"]
    assert img["tag"] == "val/sample" and img["png"].startswith("iVBOR")  # base64 of a PNG header
    assert data["runs"][1]["system"] == [] and data["runs"][1]["images"]["rows"] == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-o", "r.pdf"], "does not end in .html"),
        (["-o", "no/such/dir/r.html"], "does not exist"),
        (["spike-00000001", "-o", "r.html"], "is given twice"),
        ([], "--output"),
    ],
)
def test_usage_errors(report_runs, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    res = nb("report", "spike-00000001", "--root", str(report_runs), *args)
    assert res.exit_code == 2, res.output
    assert message in " ".join(res.stderr.split())
    assert list(Path(tmp_path).iterdir()) == []


def test_unknown_run_is_an_error(report_runs, tmp_path):
    res = nb("report", "nope", "--root", str(report_runs), "-o", str(tmp_path / "r.html"))
    assert res.exit_code == 1 and "error: no run matches 'nope'" in res.stderr
    assert not (tmp_path / "r.html").exists()


def test_system_metrics_per_machine_with_a_line_per_gpu(report_runs, tmp_path):
    out = tmp_path / "gpus.html"
    res = nb("report", "gpus-00000003", "--root", str(report_runs), "-o", str(out))
    assert res.exit_code == 0, res.output
    (run,) = page_data(out.read_text(encoding="utf-8"))["runs"]
    machines = {m["hostname"]: m for m in run["system"]}
    assert sorted(machines) == ["node-a", "node-b"]
    assert machines["node-a"]["rank"] == 0 and machines["node-b"]["rank"] == 2
    for m in machines.values():
        assert m["gpus"] == 4
        charts = {c["metric"]: c for c in m["charts"]}
        gpu = [c for name, c in charts.items() if name.startswith("gpu ")]
        assert gpu, charts.keys()
        for c in gpu:
            assert [s["label"] for s in c["series"]] == ["gpu0", "gpu1", "gpu2", "gpu3"]
        # the fake's utilization is 10*j + 5 % on GPU j
        util = next(c for name, c in charts.items() if "util" in name and "gpu" in name)
        for j, s in enumerate(util["series"]):
            assert {v for v in s["line"] if v is not None} == {10 * j + 5.0}


def test_the_page_size_is_bounded_by_buckets_not_steps():
    """10 tags on 64 ranks: the page holds at most 2,000 buckets per chart, so 8,000 steps
    cost what 2M steps do (scripts/report_size.py builds the 2M-step page: ~1.8 MB)."""
    from nbcli.report import _html

    rng = np.random.default_rng(0)
    sizes = {}
    for steps in (4_000, 8_000):  # both cut into 2,000 buckets (of 2 and 4 steps)
        charts = []
        for i in range(10):
            x = np.tile(np.arange(steps), 64)
            v = rng.normal(1.0, 0.1, len(x))
            f = pl.DataFrame({"rank": np.repeat(np.arange(64, dtype=np.int32), steps), "x": x, "value": v})
            charts.append(_data.scalar_chart(f"t/{i}", [("big", f)]))
        data = {"nb_version": "t", "max_buckets": _data.MAX_BUCKETS, "runs": [], "charts": charts}
        sizes[steps] = len(_html.render(data, "size").encode())
        assert all(len(c["x"]) <= _data.MAX_BUCKETS for c in charts)
    assert sizes[8_000] < 3 * 2**20  # the budget is 20 MB
    assert abs(sizes[8_000] - sizes[4_000]) < 0.05 * sizes[4_000]


def test_the_page_carries_uplots_licence(page):
    assert "Copyright (c) 2022 Leon Sorokin" in page and "The MIT License (MIT)" in page
