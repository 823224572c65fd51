"""The served runs in process: buckets of steps, and long ranks drawn from the writer's
envelope sidecars (bounded memory) rather than their points."""

from __future__ import annotations

import json

import numpy as np
import pytest
from starlette.requests import Request

import nblog as nb
from nbcli.series import step_buckets
from nbcli.serve import _hub
from nbcli.serve._api import Api
from nbcli.serve._hub import Catalog, Scope

SPIKE_AT, SPIKE = 312_345, 99.0


def request(path_params: dict, **query: object) -> Request:
    qs = "&".join(f"{k}={v}" for k, v in query.items()).encode()
    return Request({"type": "http", "method": "GET", "path": "/", "query_string": qs, "headers": [],
                    "path_params": path_params})


def test_step_buckets_keep_min_max_and_last_of_each_bucket():
    step = np.arange(10, dtype=np.int64)
    value = np.array([1, 2, 3, 100, 5, 6, np.nan, 8, np.inf, 10], float)
    exact, c = step_buckets(step, value, 5)
    assert not exact
    assert c["step"].tolist() == [1, 3, 5, 7, 9] and c["n"].tolist() == [2] * 5
    assert c["max"].tolist() == [2, 100, 6, 8, 10] and c["min"].tolist() == [1, 3, 5, 8, 10]
    assert c["last"][3] == 8 and np.isinf(c["last"]).sum() == 0 and c["last"][4] == 10
    exact, c = step_buckets(step[::-1], value[::-1], 20, start=2, end=4)  # unsorted in, a range
    assert exact and c["step"].tolist() == [2, 3, 4] and c["max"].tolist() == [3, 100, 5]
    exact, c = step_buckets(np.array([5, 6]), np.array([np.nan, np.nan]), 1)
    assert not exact and np.isnan(c["min"][0]) and np.isnan(c["max"][0]) and c["n"].tolist() == [2]


def test_segments_are_bucketed_by_their_own_min_max_and_counts():
    exact, c = step_buckets(np.array([9, 19, 29, 39]), np.array([1.0, 2, 3, 4]), 2,
                            lo=np.array([0.0, 1, 2, 3]), hi=np.array([1.5, 50, 3.5, 4.5]), n=np.array([10, 10, 10, 10]))
    assert not exact and c["step"].tolist() == [19, 39] and c["max"].tolist() == [50, 4.5]
    assert c["min"].tolist() == [0, 2] and c["n"].tolist() == [20, 20] and c["last"].tolist() == [2, 4]
    with pytest.raises(ValueError):
        step_buckets(np.zeros(1, np.int64), np.zeros(1), 0)


@pytest.fixture(scope="module")
def long_run(tmp_path_factory):
    """500,000 steps of one tag on rank 0 (a 6 MB event log with its envelope sidecar), a
    one-step spike at step 312,345."""
    root = tmp_path_factory.mktemp("hub") / "runs"
    run = nb.init("long", run_id="long-00000001", root=root, system=False)
    for step in range(500_000):
        run.add_scalar("loss", SPIKE if step == SPIKE_AT else 1.0 + (step % 7) / 10, step=step)
        if step % 20_000 == 19_999:
            run.flush()
    run.finish()
    return root


def test_a_long_rank_is_drawn_from_its_envelope_without_loading_its_points(long_run, monkeypatch):
    monkeypatch.setattr(_hub, "BIG_RUN_BYTES", 1 << 20)
    catalog = Catalog(Scope(str(long_run)))
    api = Api(catalog)
    got = json.loads(api.scalars(request({"run_id": "long-00000001"}, tag="loss", buckets=400)).body)
    assert got["summary"] == "envelope" and got["exact"] is False and got["points"] == 500_000
    assert max(got["series"]["max"]) == SPIKE and got["last_step"] == 499_999
    assert len(got["series"]["step"]) <= 400
    chart = json.loads(api.chart(request({}, runs="long-00000001", tag="loss", buckets=300)).body)
    assert chart["summarised"] == ["long-00000001"]
    assert max(v for v in chart["series"][0]["hi"] if v is not None) == SPIKE
    served = catalog.run("long-00000001")
    assert served.live().loaded_ranks() == []  # no point of the rank was read into memory
    assert served.scalar_tags() == ["loss"]


def test_below_the_bound_the_same_answers_come_from_every_point(long_run):
    api = Api(Catalog(Scope(str(long_run))))
    got = json.loads(api.scalars(request({"run_id": "long-00000001"}, tag="loss", buckets=400)).body)
    assert got["summary"] is None and got["points"] == 500_000 and max(got["series"]["max"]) == SPIKE
    zoom = json.loads(api.scalars(request({"run_id": "long-00000001"}, tag="loss", buckets=400,
                                          start=SPIKE_AT - 100, end=SPIKE_AT + 100)).body)
    assert zoom["exact"] is True and len(zoom["series"]["step"]) == 201
    assert zoom["series"]["last"][100] == SPIKE


def test_a_run_of_many_ranks_reads_scalars_of_rank_0_and_ranks_with_sidecars_only(tmp_path, monkeypatch):
    from test_serve_api import start_ranks, wait_ranks

    root = tmp_path / "runs"
    wait_ranks(start_ranks(root, "many-00000001", 4, {"steps": 20, "offset_rank": 2}))
    monkeypatch.setattr(_hub, "MAX_SCALAR_RANKS", 2)
    catalog = Catalog(Scope(str(root)))
    served = catalog.run("many-00000001")
    assert served.ranks() == [0, 1, 2, 3] and served.scalar_ranks() == [0]  # small logs: no sidecar
    frame, summarised = served.frame("train/loss")
    assert frame["rank"].unique().to_list() == [0] and not summarised
    (run_dir,) = [p for p in (root / "serve").iterdir()]
    (run_dir / "envelope.r2.s0.bin").write_bytes(b"")  # a sidecar names a rank that logs scalars
    assert served.scalar_ranks() == [0, 2]
    assert served.live().loaded_ranks() == [0]  # ranks 1 and 3 were never read
    monkeypatch.setattr(_hub, "MAX_SCALAR_RANKS", 256)
    assert served.scalar_ranks() == [0, 1, 2, 3]
