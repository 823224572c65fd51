"""The hang watchdog (nblog/write/_hang.py) with an injected clock: when it dumps, how
often, the moved note, the automatic period, and failures that only warn."""

from __future__ import annotations

import json
import os
import threading

import pytest

from nblog.format._filenames import hang_dump_file_name, parse_hang_file_name
from nblog.reader import hang_report
from nblog.write import _hang as H


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _dog(tmp_path, step_box, clock, **kw):
    kw.setdefault("signum", None)
    kw.setdefault("faulthandler", False)
    return H.Watchdog(str(tmp_path), 3, 1, "h", lambda: step_box[0], clock=clock, wall=clock, **kw)


def _dumps(tmp_path):
    return sorted(n for n in os.listdir(tmp_path) if (p := parse_hang_file_name(n)) and p[2] is not None)


def test_stall_dumps_once_per_period_at_most_five_then_moved_note(tmp_path):
    clock, step = Clock(), [0]
    dog = _dog(tmp_path, step, clock, hang_s=10)
    assert dog.poll() is None
    clock.t += 9.9
    assert dog.poll() is None
    clock.t += 0.1
    assert dog.poll() == "stall"
    assert dog.poll() is None  # not again within the period
    for _ in range(10):
        clock.t += 10
        dog.poll()
    assert len(_dumps(tmp_path)) == H.PER_STALL
    step[0] = 1
    assert dog.poll() == "moved"
    note = json.loads((tmp_path / "stacks.r3.s1.moved.json").read_text())
    assert note["stall"] == 1 and note["dumps"] == [1, 2, 3, 4, 5] and note["step"] == 1
    rep = hang_report(str(tmp_path))
    assert rep["stalled"] is False and rep["ranks"]["3"]["kind"] == "moved"


def test_dump_holds_stacks_step_and_no_record_without_torch_distributed(tmp_path):
    clock, step = Clock(), [7]
    dog = _dog(tmp_path, step, clock, hang_s=5)
    dog.poll()
    clock.t += 5
    t = threading.Thread(target=dog.poll)  # as in the watchdog thread: the main thread waits here
    t.start()
    t.join()
    lines = (tmp_path / hang_dump_file_name(3, 1, 1)).read_text().splitlines()
    head, body = json.loads(lines[0]), json.loads(lines[1])
    assert head["kind"] == "stall" and head["step"] == 7 and head["rank"] == 3 and head["stalled_s"] == 5
    assert any(f[2] == "test_dump_holds_stacks_step_and_no_record_without_torch_distributed" for f in head["main"])
    assert head["last"] is None and head["fr"] is False
    assert any(t["main"] for t in body["threads"])


def test_automatic_period_five_times_the_longest_gap_with_a_floor(tmp_path):
    clock, step = Clock(), [None]
    dog = _dog(tmp_path, step, clock, hang_s=None)
    clock.t += 10_000  # no step yet: not armed
    assert dog.poll() is None and dog.period() is None
    for s in range(10):  # 30 s a step
        step[0] = s
        dog.poll()
        clock.t += 30
    assert dog.period() == 150
    for s in range(10, 20):  # twofold slower: 60 s a step, under 150 s
        step[0] = s
        dog.poll()
        clock.t += 60
        assert dog.poll() is None
    assert _dumps(tmp_path) == []
    clock2, step2 = Clock(), [0]
    fast = _dog(tmp_path / "x", step2, clock2, hang_s=None)
    fast.poll()
    step2[0] = 1
    clock2.t += 1
    fast.poll()
    assert fast.period() == H.FLOOR_S


def test_signal_request_dumps_at_once_and_does_not_count_as_stall(tmp_path):
    clock, step = Clock(), [1]
    dog = _dog(tmp_path, step, clock, hang_s=0)
    dog.request()
    assert dog.poll() == "signal"
    assert hang_report(str(tmp_path))["stalled"] is False


def test_session_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(H, "PER_SESSION", 3)
    clock, step = Clock(), [0]
    dog = _dog(tmp_path, step, clock, hang_s=1)
    for i in range(10):
        clock.t += 1
        dog.poll()
        step[0] = i + 1 if i % 2 else step[0]
        dog.poll()
    assert len(_dumps(tmp_path)) == 3


def test_read_only_folder_warns_once_never_raises(tmp_path, caplog):
    clock, step = Clock(), [0]
    dog = _dog(tmp_path / "missing", step, clock, hang_s=1)
    for _ in range(3):
        clock.t += 1
        dog.poll()
    assert sum("hang dump not written" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.parametrize("value,want", [(None, None), ("", None), ("auto", None), ("off", 0.0), ("0", 0.0),
                                        ("2.5", 2.5), (7, 7.0)])
def test_parse_hang_s(value, want):
    assert H.parse_hang_s(value) == want


@pytest.mark.parametrize("value", ["soon", "-1", -3])
def test_parse_hang_s_refuses(value):
    with pytest.raises(ValueError):
        H.parse_hang_s(value)


def test_parse_signal():
    import signal

    assert H.parse_signal(None) == signal.SIGUSR1
    assert H.parse_signal("usr2") == signal.SIGUSR2
    assert H.parse_signal("off") is None
    with pytest.raises(ValueError):
        H.parse_signal("NOPE")


def test_flight_recorder_env(monkeypatch):
    monkeypatch.delenv("TORCH_FR_BUFFER_SIZE", raising=False)
    monkeypatch.delenv("TORCH_NCCL_TRACE_BUFFER_SIZE", raising=False)
    assert H.enable_flight_recorder({"NB_HANG_FR": "0"}) == "off"
    assert H.enable_flight_recorder({"TORCH_FR_BUFFER_SIZE": "0"}) == "user"
    assert H.enable_flight_recorder({}) == "set"
    assert os.environ["TORCH_FR_BUFFER_SIZE"] == H.FR_BUFFER


def test_state_from_pg_status():
    status = {"last_enqueued_collective": 6, "last_started_collective": -1, "last_completed_collective": 5}
    assert H._state({"state": "scheduled"}, status, False, 5) == "completed"
    assert H._state({"state": "scheduled"}, status, False, 6) == "scheduled"
    assert H._state({"state": "completed"}, status, False, 6) == "completed"
    assert H._state({"state": "scheduled", "retired": True}, None, False, 9) == "completed"


def test_a_step_that_cannot_be_read_is_warned_once_and_counted(tmp_path, caplog):
    """A step callable that raises never stops the watchdog; it is said once and counted."""
    def bad():
        raise RuntimeError("no step")
    dog = H.Watchdog(str(tmp_path), 3, 1, "h", bad, hang_s=5, signum=None, faulthandler=False,
                     clock=lambda: 0.0, wall=lambda: 0.0, record=lambda: (None, "no record"))
    with caplog.at_level("WARNING", logger="nblog"):
        for _ in range(3):
            assert dog.poll() is None
    assert dog.problems == {"step": 3}
    assert sum("cannot read the step" in r.getMessage() for r in caplog.records) == 1
