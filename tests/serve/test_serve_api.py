"""``nb serve``'s JSON API and its security, against a real server process.

Every answer is checked against the reader library or the command it mirrors (``nb ls
--json``, ``nb show --json``, ``nb timers``'s rule): one definition of each fact.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from report_helpers import SPIKE_STEP, SPIKE_VALUE
from serve_helpers import NB, served, start_server

from nblog import RunNotFoundError, RunReader

nb_errors = (RunNotFoundError, OSError)

HERE = Path(__file__).parent
BAND_WRITER = HERE / "_band_writer.py"
_DROP = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "OMPI_", "SLURM_", "TORCHELASTIC_",
         "NB_", "PMI_")
API_PATHS = ["/api/runs", "/api/runs/spike-00000001", "/api/runs/spike-00000001/scalars?tag=train/loss",
             "/api/runs/spike-00000001/band?tag=train/loss", "/api/runs/spike-00000001/timers",
             "/api/runs/spike-00000001/stream", "/api/page?runs=spike-00000001",
             "/api/chart?runs=spike-00000001&tag=train/loss", "/api/stream?runs=spike-00000001",
             "/api/diff?runs=spike-00000001,other-00000002", "/", "/static/serve.js", "/static/uPlot.js"]


def start_ranks(root: Path, run_id: str, world: int, spec: dict) -> list[subprocess.Popen]:
    procs = []
    for rank in range(world):
        env = {k: v for k, v in os.environ.items() if not k.startswith(_DROP)}
        env.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
                   GROUP_RANK="0", NB_DIR=str(root), NB_RUN_ID=run_id)
        procs.append(subprocess.Popen([sys.executable, str(BAND_WRITER), json.dumps(spec)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return procs


def wait_ranks(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        _out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err


def nb_json(*args: str) -> object:
    out = subprocess.run([NB, *args, "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


@pytest.fixture(scope="module")
def server(serve_runs):
    with served(serve_runs) as s:
        yield s


# -- the token -----------------------------------------------------------------------------


@pytest.mark.parametrize("path", API_PATHS)
def test_without_the_token_every_address_answers_401_and_no_data(server, path):
    for token in (None, "x" * 32, server.token[:-1]):
        r = server.get(path, token=token)
        assert r.status == 401, (path, token, r.status)
        assert r.headers["content-type"] == "application/json"
        body = r.json()
        assert set(body) == {"error"} and "spike" not in r.body.decode() and "train/loss" not in r.body.decode()
        assert r.headers["www-authenticate"] == "Bearer"


def test_the_printed_address_sets_an_httponly_strict_cookie_and_drops_the_token_from_the_address(server):
    r = server.get(f"/?token={server.token}&runs=spike-00000001", token=None)
    assert r.status == 303
    assert r.headers["location"] == "/?runs=spike-00000001"  # the token is gone from the address bar
    cookie = r.headers["set-cookie"]
    assert cookie.startswith(f"nb_serve_{server.port}={server.token};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    got = server.get("/api/runs", token=None, headers={"Cookie": f"nb_serve_{server.port}={server.token}"})
    assert got.status == 200 and {row["id"] for row in got.json()} == {"spike-00000001", "other-00000002"}
    wrong = server.get("/api/runs", token=None, headers={"Cookie": f"nb_serve_{server.port}=nope"})
    assert wrong.status == 401
    other_port = server.get("/api/runs", token=None, headers={"Cookie": f"nb_serve_1={server.token}"})
    assert other_port.status == 401  # another server's cookie is not this one's


def test_an_api_address_takes_no_token_from_its_query_and_never_redirects_by_host(server):
    """A token in a script's URL ends up in shell histories: the API wants the header or
    the cookie; a trailing slash is no redirect to an address built from the Host header."""
    r = server.get(f"/api/runs?token={server.token}", token=None)
    assert r.status == 401 and "train/loss" not in r.body.decode()
    slash = server.get("/api/runs/", headers={"Host": "evil.example"})
    assert slash.status == 404 and "location" not in slash.headers


def test_nb_serve_token_sets_the_token_and_a_short_one_is_refused(serve_runs):
    token = "a-token-from-the-environment-1234"
    with served(serve_runs, env={"NB_SERVE_TOKEN": token}) as s:
        assert s.token == token
        assert s.get("/api/runs", token=token).status == 200
    bad = subprocess.run([NB, "serve", "--root", str(serve_runs), "--port", "0"], capture_output=True, text=True,
                         env={**os.environ, "NB_SERVE_TOKEN": "short"}, timeout=60)
    assert bad.returncode == 2 and "NB_SERVE_TOKEN" in bad.stderr and "16" in bad.stderr
    assert "Traceback" not in bad.stderr and bad.stdout == ""


def test_every_answer_carries_the_security_headers_and_no_cors(server):
    for path, token in (("/api/runs", True), ("/", True), ("/static/serve.js", True), ("/api/runs", None)):
        r = server.get(path, token=token, headers={"Origin": "http://evil.example"})
        h = r.headers
        assert h["content-security-policy"].startswith("default-src 'self'")
        assert h["x-content-type-options"] == "nosniff" and h["referrer-policy"] == "no-referrer"
        assert not any(k.startswith("access-control-") for k in h), h


def test_two_tokens_differ_from_one_start_to_the_next(serve_runs):
    with served(serve_runs) as a, served(serve_runs) as b:
        assert a.token != b.token and len(a.token) >= 32


# -- paths and bad requests ------------------------------------------------------------------


@pytest.mark.parametrize("path", [
    "/api/runs/..%2F..%2Fetc%2Fpasswd", "/api/runs/%2E%2E", "/api/runs/..", "/api/runs/%2Fetc%2Fpasswd/scalars?tag=x",
    "/static/..%2F_api.py", "/static/../serve/_api.py", "/api/runs/plots%2Fspike-00000001",
    "/api/chart?runs=..%2F..%2Fetc&tag=x", "/api/page?runs=/etc", "/nothing-here",
])
def test_paths_out_of_the_served_runs_are_refused_with_a_json_error(server, path):
    r = server.get(path)
    assert r.status == 404, (path, r.status, r.body[:200])
    assert set(r.json()) == {"error"} and b"Traceback" not in r.body


@pytest.mark.parametrize("path, words", [
    ("/api/runs/spike-00000001/scalars", "tag is required"),
    ("/api/runs/spike-00000001/scalars?tag=train/loss&buckets=0", "buckets"),
    ("/api/runs/spike-00000001/scalars?tag=train/loss&buckets=abc", "whole number"),
    ("/api/runs/spike-00000001/scalars?tag=train/loss&buckets=99999999", "buckets"),
    ("/api/runs/spike-00000001/scalars?tag=train/loss&start=10&end=5", "before start"),
    ("/api/runs/spike-00000001/scalars?tag=train/loss&start=nan", "finite"),
    ("/api/runs/spike-00000001/band?tag=train/loss&start=x", "number"),
    ("/api/runs?where=lr%20%3C", "cannot parse"),
    ("/api/runs?where=nokey%20%3E%201", "nokey"),
    ("/api/chart?tag=train/loss", "runs is required"),
    ("/api/diff?runs=spike-00000001", "two runs"),
])
def test_a_bad_parameter_is_a_400_with_one_line_of_json(server, path, words):
    r = server.get(path)
    assert r.status == 400, (path, r.status, r.body)
    assert r.body.count(b"\n") == 1 and set(r.json()) == {"error"}
    assert words in r.json()["error"] and b"Traceback" not in r.body


def test_an_unknown_run_is_a_404(server):
    r = server.get("/api/runs/no-such-run/scalars?tag=x")
    assert r.status == 404 and "no-such-run" in r.json()["error"]


def test_a_run_folder_linked_from_outside_the_root_is_not_served(tmp_path, serve_runs):
    root = tmp_path / "runs"
    (root / "plots").mkdir(parents=True)
    os.symlink(serve_runs / "plots" / "other-00000002", root / "plots" / "other-00000002")
    os.symlink(serve_runs / "plots", root / "linked")
    with served(root) as s:
        assert s.get("/api/runs").json() == []
        assert s.get("/api/runs/other-00000002").status == 404


# -- what the answers say -------------------------------------------------------------------


def test_runs_are_the_rows_of_nb_ls_json_and_where_filters_as_nb_ls_does(server, serve_runs):
    assert server.get("/api/runs").json() == nb_json("ls", "--root", str(serve_runs))
    picked = server.get("/api/runs?where=lr%20%3E%200.002").json()
    assert picked == nb_json("ls", "--root", str(serve_runs), "--where", "lr > 0.002")
    assert [r["id"] for r in picked] == ["other-00000002"]
    rows = server.get("/api/runs?with=config").json()
    by_id = {r["id"]: r for r in rows}
    assert by_id["spike-00000001"]["config"] == {"lr": 0.001, "model.width": 64}
    assert set(by_id["spike-00000001"]["last"]) >= {"train/loss", "train/lr"}


def test_a_run_is_what_nb_show_json_gives(server, serve_runs):
    got = server.get("/api/runs/spike-00000001").json()
    want = nb_json("show", "spike-00000001", "--root", str(serve_runs))
    assert got == want


def test_scalars_keep_a_one_step_spike_in_min_max_buckets_and_give_every_point_when_asked(server, serve_runs):
    frame = RunReader("spike-00000001", serve_runs).scalars("train/loss")
    r = server.get("/api/runs/spike-00000001/scalars?tag=train/loss&rank=0&buckets=100").json()
    assert r["exact"] is False and r["rank"] == 0 and r["last_step"] == 2999
    s = r["series"]
    assert len(s["step"]) == 100 and r["points"] == len(frame) == 3000
    where = next(i for i, st in enumerate(s["step"]) if st >= SPIKE_STEP)
    assert s["max"][where] == SPIKE_VALUE  # a one-step spike in 3,000 steps, 30 steps a bucket
    assert s["step"][-1] == 2999 and s["step"][0] == 29  # a bucket's step: its last point's
    value_at = dict(zip(frame["step"].to_list(), frame["value"].to_list(), strict=True))
    assert all(s["last"][i] == value_at[st] or (s["last"][i] != s["last"][i]) for i, st in enumerate(s["step"]))
    assert "nan" not in [s["min"][i] for i in range(len(s["step"]))]  # non-finite values never enter min/max
    full = server.get("/api/runs/spike-00000001/scalars?tag=train/loss&buckets=5000").json()
    assert full["exact"] is True and full["series"]["step"] == frame["step"].to_list()
    assert full["series"]["last"][500] == "nan" and full["series"]["last"][700] == "inf"  # the JSON rule of every command
    zoom = server.get(f"/api/runs/spike-00000001/scalars?tag=train/loss&buckets=100&start={SPIKE_STEP - 20}"
                      f"&end={SPIKE_STEP + 20}").json()
    assert zoom["exact"] is True and zoom["series"]["step"] == list(range(SPIKE_STEP - 20, SPIKE_STEP + 21))
    assert max(v for v in zoom["series"]["max"] if isinstance(v, float)) == SPIKE_VALUE


def test_points_hidden_by_a_resume_are_left_out_as_everywhere(tmp_path):
    import nblog as nb

    root = tmp_path / "runs"
    first = nb.init("resumed", run_id="res-00000001", root=root, system=False)
    for step in range(20):
        first.add_scalar("loss", 1.0, step=step)
    first.finish()
    second = nb.init("resumed", run_id="res-00000001", root=root, system=False, resume="must")
    for step in range(10, 25):
        second.add_scalar("loss", 2.0, step=step)
    second.finish()
    want = RunReader("res-00000001", root).scalars("loss")
    with served(root) as s:
        got = s.get("/api/runs/res-00000001/scalars?tag=loss&buckets=1000").json()
    assert got["series"]["step"] == want["step"].to_list() == list(range(25))
    assert got["series"]["last"] == want["value"].to_list() == [1.0] * 10 + [2.0] * 15


def test_the_band_names_the_outlying_rank_and_the_timers_the_straggler(server, tmp_path):
    root = tmp_path / "runs"
    wait_ranks(start_ranks(root, "band-00000001", 4, {"steps": 300, "offset_rank": 2}))
    with served(root) as s:
        b = s.get("/api/runs/band-00000001/band?tag=train/loss&buckets=50").json()
    assert b["ranks"] == [0, 1, 2, 3] and b["outlier"] == 2 and b["exact"] is False
    assert len(b["series"]["step"]) == 50
    assert b["series"]["max"][0] == 1.0 + 2 / 100 + 5.0 and b["series"]["min"][0] == 1.0
    assert b["series"]["median"][0] == pytest.approx(1.02)  # the median of the four ranks' means
    assert b["series"]["outlier"][0] == pytest.approx(6.02)
    t = server.get("/api/runs/spike-00000001/timers").json()
    (heat,) = t["timers"]
    assert heat["tag"] == "time/step" and heat["stragglers"] == [2] and heat["ranks"] == [0, 1, 2, 3]


def test_page_and_chart_give_the_reports_data_shapes(server):
    page = server.get("/api/page?runs=spike-00000001,other-00000002").json()
    assert [r["id"] for r in page["runs"]] == ["spike-00000001", "other-00000002"]
    assert page["charts"] == [] and "train/loss" in page["tags"]
    chart = server.get("/api/chart?runs=spike-00000001,other-00000002&tag=train/loss&buckets=300").json()
    assert [sr["run"] for sr in chart["series"]] == ["spike-00000001", "other-00000002"]
    assert chart["bucketed"] is True and len(chart["x"]) <= 300
    assert max(v for v in chart["series"][0]["hi"] if v is not None) == SPIKE_VALUE
    one = server.get("/api/chart?runs=spike-00000001&tag=train/loss&rank=1").json()
    assert one["series"] == []  # rank 1 logged no train/loss


def test_a_damaged_log_is_reported_in_the_answer_and_a_vanished_run_never_stops_the_server(tmp_path):
    root = tmp_path / "runs"
    wait_ranks(start_ranks(root, "dmg-00000001", 1, {"steps": 2000, "flush": 100}))
    wait_ranks(start_ranks(root, "gone-00000001", 1, {"steps": 10}))
    log = root / "serve" / "dmg-00000001" / "events.r0.s0.log"
    raw = bytearray(log.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    log.write_bytes(bytes(raw))
    with served(root) as s:
        info = s.get("/api/page?runs=dmg-00000001&part=info").json()  # the page's first answer says it too
        assert info["runs"][0]["damage"] and info["runs"][0]["damage"][0]["lost"] is True
        r = s.get("/api/runs/dmg-00000001/scalars?tag=train/loss&buckets=5000").json()
        assert r["damage"] and r["damage"][0]["rank"] == 0 and r["damage"][0]["lost"] is True
        assert 0 < r["points"] < 2000
        assert s.get("/api/runs").status == 200
        import shutil

        shutil.rmtree(root / "serve" / "gone-00000001")
        for path in ("/api/runs/gone-00000001", "/api/runs/gone-00000001/scalars?tag=train/loss"):
            got = s.get(path)
            assert got.status in (404, 200) and b"Traceback" not in got.body
        assert s.get("/api/runs").status == 200 and s.proc.poll() is None


def test_nothing_is_written_under_the_root(serve_runs):
    before = tree(serve_runs)
    with served(serve_runs) as s:
        for path in API_PATHS:
            if "stream" not in path:
                assert s.get(path).status == 200, path
    assert tree(serve_runs) == before


# -- the live stream -------------------------------------------------------------------------


def read_events(resp: http.client.HTTPResponse, want: int) -> list[dict]:
    """``data:`` events from an open stream until ``want`` points arrived (the
    connection's timeout ends a stream that stays silent: the server sends a comment
    every 15 s, so a wait past it is a failure)."""
    events, points, buf = [], 0, b""
    while points < want:
        chunk = resp.read1(65536)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            block, buf = buf.split(b"\n\n", 1)
            for line in block.split(b"\n"):
                if line.startswith(b"data: "):
                    e = json.loads(line[6:])
                    events.append(e)
                    points += len(e["step"])
    return events


def test_the_stream_pushes_the_points_flushed_after_it_opened(tmp_path):
    root = tmp_path / "runs"
    go = tmp_path / "go"
    procs = start_ranks(root, "live-00000001", 2, {"steps": 50, "go": str(go), "more": 3})
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # both ranks' first 50 steps are on disk
            try:
                frame = RunReader("live-00000001", root).scalars("train/loss", all_ranks=True)
            except nb_errors:  # the run folder may not exist yet
                frame = None
            if frame is not None and len(frame) == 100:
                break
            time.sleep(0.05)
        with served(root) as s:
            conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
            conn.request("GET", "/api/runs/live-00000001/stream", headers={"Authorization": f"Bearer {s.token}"})
            resp = conn.getresponse()
            assert resp.status == 200 and resp.getheader("content-type").startswith("text/event-stream")
            first = resp.readline()
            assert first == b"retry: 2000\n"
            go.write_text("go")
            events = read_events(resp, want=6)
            conn.close()
    finally:
        wait_ranks(procs)
    got = sorted((e["rank"], step, value) for e in events for step, value in zip(e["step"], e["value"], strict=True))
    assert {e["tag"] for e in events} == {"train/loss"} and {e["run"] for e in events} == {"live-00000001"}
    assert got == [(r, step, 1.0 + r / 100 + 0.5) for r in (0, 1) for step in (50, 51, 52)]  # only what came after


# -- the command -----------------------------------------------------------------------------


def test_sigint_also_stops_it_with_exit_status_0(serve_runs):
    import signal

    s = start_server(serve_runs)
    assert s.get("/api/runs").status == 200
    s.proc.send_signal(signal.SIGINT)
    assert s.proc.wait(30) == 0


def test_another_host_than_loopback_warns_and_a_busy_port_is_a_clear_error(serve_runs):
    with served(serve_runs, args=("--host", "0.0.0.0")) as s:
        assert s.url.startswith("http://0.0.0.0:")
    assert "warning: listening on 0.0.0.0, not on a loopback address" in s.stderr[-1]
    with served(serve_runs) as s:
        busy = subprocess.run([NB, "serve", "--root", str(serve_runs), "--port", str(s.port)], capture_output=True,
                              text=True, timeout=60)
    assert busy.returncode == 1 and f"cannot listen on 127.0.0.1:{s.port}" in busy.stderr
    assert "Traceback" not in busy.stderr


def test_serving_named_runs_and_projects_only(serve_runs, tmp_path):
    with served(serve_runs, "other-00000002") as s:
        assert [r["id"] for r in s.get("/api/runs").json()] == ["other-00000002"]
        assert s.get("/api/runs/spike-00000001").status == 404
    with served(serve_runs, "plots") as s:
        assert len(s.get("/api/runs").json()) == 2
    bad = subprocess.run([NB, "serve", "no-such-thing", "--root", str(serve_runs), "--port", "0"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "no-such-thing" in bad.stderr and "Traceback" not in bad.stderr
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(serve_runs / "plots", root / "linked")  # a project folder that is a link out of the root
    linked = subprocess.run([NB, "serve", "linked", "--root", str(root), "--port", "0"], capture_output=True,
                            text=True, timeout=60)
    assert linked.returncode == 2 and "linked" in linked.stderr and "Traceback" not in linked.stderr


@pytest.mark.parametrize("host, code, words", [
    ("", 2, "no address given"),
    ("nosuchhost.invalid", 1, "--host takes an address of this machine"),
])
def test_a_bad_host_is_a_clear_error(serve_runs, host, code, words):
    out = subprocess.run([NB, "serve", "--root", str(serve_runs), "--port", "0", "--host", host], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == code and words in out.stderr and "Traceback" not in out.stderr and out.stdout == ""


def test_without_the_serve_extra_it_says_what_to_install(serve_runs):
    code = ("import sys; sys.modules['uvicorn'] = None; sys.argv = ['nb', 'serve', '--root', sys.argv[1]]; "
            "from nbcli.app import main; main()")
    out = subprocess.run([sys.executable, "-c", code, str(serve_runs)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "pip install 'nblog[serve]'" in out.stderr and "Traceback" not in out.stderr


def test_bucketing_cost_does_not_depend_on_a_random_sample(server):
    """Two requests of the same chart give the same buckets: nothing is sampled at random."""
    a = server.get("/api/runs/spike-00000001/scalars?tag=train/loss&buckets=37").json()
    b = server.get("/api/runs/spike-00000001/scalars?tag=train/loss&buckets=37").json()
    assert a == b and np.isfinite([v for v in a["series"]["max"] if isinstance(v, float)]).all()


def test_a_chart_against_wall_or_active_time(server, serve_runs):
    frame = RunReader("spike-00000001", serve_runs).scalars("train/loss")
    wall = server.get("/api/chart?runs=spike-00000001&tag=train/loss&buckets=5000&x=wall").json()
    assert wall["time"] is True and wall["axis"] == "wall" and wall["bucketed"] is False
    assert wall["x"][0] == pytest.approx(frame["wall_time"].min()) and wall["x"][-1] == pytest.approx(frame["wall_time"].max())
    active = server.get("/api/chart?runs=spike-00000001&tag=train/loss&buckets=3&x=active").json()
    # 3,000 points in a few milliseconds of wall clock: a handful of distinct times, 3 buckets
    assert active["time"] is False and active["bucketed"] is True and len(active["x"]) == 3
    assert 0 <= active["x"][0] < active["x"][-1] < 600
    assert max(v for v in active["series"][0]["hi"] if v is not None) == SPIKE_VALUE
    bad = server.get("/api/chart?runs=spike-00000001&tag=train/loss&x=epoch")
    assert bad.status == 400 and "step, wall or active" in bad.json()["error"]


_FAILING = """
import sys
import nblog as nb
run = nb.init("crash", run_id="crash-00000001", root=sys.argv[1], console=True, system=False)
for step in range(10):
    run.add_scalar("loss", 1.0 / (step + 1), step=step)
    run.flush()
    print(f"training step {step}", flush=True)
    if step == 4:
        run.alert("loss plateau", "seen at step 4")
    if step == 7:
        raise ValueError("bad batch")
"""


def test_console_lines_and_the_failures_and_alerts_marked_on_charts(tmp_path):
    root = tmp_path / "runs"
    env = {k: v for k, v in os.environ.items() if not k.startswith(_DROP)}
    p = subprocess.run([sys.executable, "-c", _FAILING, str(root)], capture_output=True, text=True, timeout=120,
                       env=env)
    assert p.returncode == 1 and "bad batch" in p.stderr
    with served(root) as s:
        c = s.get("/api/runs/crash-00000001/console?last=30").json()
        assert c["ranks"] == [0] and c["rank"] == 0
        out = [ln["text"] for ln in c["lines"] if ln["stream"] == "stdout"]
        assert out == [f"training step {k}" for k in range(8)]
        steps = [ln["step"] for ln in c["lines"]]  # stamped when the capture read them: never ahead of the run
        assert steps == sorted(steps) and all(0 <= k <= 7 for k in steps)
        err = [ln["text"] for ln in c["lines"] if ln["stream"] == "stderr"]
        assert err[0].startswith("Traceback") and err[-1] == "ValueError: bad batch"  # what the rank printed
        assert len(s.get("/api/runs/crash-00000001/console?last=3").json()["lines"]) == 3
        grep = s.get("/api/runs/crash-00000001/console?grep=step%204").json()
        assert [ln["text"] for ln in grep["lines"]] == ["training step 4"]
        bad = s.get("/api/runs/crash-00000001/console?grep=(")
        assert bad.status == 400 and "regular expression" in bad.json()["error"]
        details = s.get("/api/page?runs=crash-00000001&part=details").json()
        (run,) = details["runs"]
        kinds = [(e["kind"], e["step"], e["rank"]) for e in run["events"]]
        assert kinds == [("alert", 4, 0), ("failure", 7, 0)]
        assert "ValueError: bad batch" in run["events"][1]["text"]
        info = s.get("/api/page?runs=crash-00000001&part=info").json()
        assert info["runs"][0]["events"] == [] and info["runs"][0]["status"] == "failed"
