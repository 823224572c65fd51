"""Tensors on a device (CUDA or any non-CPU device) are logged without a sync (nblog.write._device).

There is no GPU here: ``faketorch`` below is a stand-in library with the few calls nb
makes (``empty``, ``cuda.Event``, ``cuda.current_stream``, ``Event``, tensors with
``detach``/``clone``/``copy_``). Its device is a queue: work runs only when the test
runs it (or, for a "progressing" device, a little at each ``event.query()``), and
``float()``/``.item()``/``.cpu()`` of a device tensor or ``event.synchronize()`` first
runs the whole queue, as a real sync waits for it. Every call is recorded with the
thread that made it, so the tests can say which thread would have waited.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import threading
import types

import pytest

import nblog as nb

SYNCING = {"__float__", "item", "cpu", "synchronize", "tolist", "numpy"}


class Device:
    """A device's queue of work, run in order when asked to."""

    def __init__(self, progress_per_query: int = 0, never: bool = False):
        self.queue: list = []
        self.done = 0  # how many queued operations have run
        self.progress_per_query = progress_per_query
        self.never = never  # a device that never runs anything (hung)
        self.calls: list[tuple[str, str, str]] = []  # (call, thread name, device type)
        self.converted = threading.Event()  # set when a host copy is read

    def enqueue(self, op) -> int:
        self.queue.append(op)
        return len(self.queue)

    def run(self, n: int | None = None) -> None:
        if self.never:
            return
        end = len(self.queue) if n is None else min(len(self.queue), self.done + n)
        while self.done < end:
            self.queue[self.done]()
            self.done += 1

    def record(self, name: str, dev: str) -> None:
        self.calls.append((name, threading.current_thread().name, dev))


class FakeDeviceType:
    def __init__(self, type: str):
        self.type = type
        self.index = 0


class Tensor:
    """A one-element tensor of faketorch (``__module__`` says which library it is)."""

    def __init__(self, dev: Device, value: float | None, device: str, numel: int = 1):
        self._dev = dev
        self._value = value
        self._device = FakeDeviceType(device)
        self._numel = numel
        self.shape = ()
        self.dtype = "float32"

    @property
    def device(self) -> FakeDeviceType:  # a class attribute, as torch's (what nb looks for)
        return self._device

    def _rec(self, name: str) -> None:
        self._dev.record(name, self.device.type)

    def numel(self) -> int:
        self._rec("numel")
        return self._numel

    def detach(self) -> Tensor:
        self._rec("detach")
        return self  # the same storage: what detach shares in torch

    def clone(self) -> Tensor:
        self._rec("clone")
        out = Tensor(self._dev, None, self.device.type)
        self._dev.enqueue(lambda: setattr(out, "_value", self._value))
        return out

    def copy_(self, src: Tensor, non_blocking: bool = False) -> Tensor:
        self._rec("copy_")
        assert non_blocking, "a blocking copy from the device waits for it"
        self._dev.enqueue(lambda: setattr(self, "_value", src._value))
        return self

    def add_(self, x: float) -> Tensor:  # an in-place update, in stream order
        self._rec("add_")
        self._dev.enqueue(lambda: setattr(self, "_value", self._value + x))
        return self

    def _read(self, name: str) -> float:
        self._rec(name)
        if self._numel != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        if self.device.type != "cpu":
            self._dev.run()  # a sync: everything queued runs first
        else:
            self._dev.converted.set()
        return self._value

    def __float__(self) -> float:
        return self._read("__float__")

    def item(self) -> float:
        return self._read("item")

    def cpu(self) -> Tensor:
        return Tensor(self._dev, self._read("cpu"), "cpu")


Tensor.__module__ = "faketorch"


class Event:
    def __init__(self, dev: Device, device: str = "cuda"):
        self._dev = dev
        self._at: int | None = None
        self._device = device

    def record(self, stream: object = None) -> None:
        self._dev.record("Event.record", self._device)
        self._at = self._dev.enqueue(lambda: None)

    def query(self) -> bool:
        self._dev.record("Event.query", self._device)
        if self._dev.progress_per_query:
            self._dev.run(self._dev.progress_per_query)
        return self._at is not None and self._dev.done >= self._at

    def synchronize(self) -> None:
        self._dev.record("synchronize", self._device)
        self._dev.run()


def make_lib(dev: Device) -> types.ModuleType:
    """faketorch: the calls of torch that nblog.write._device makes."""
    lib = types.ModuleType("faketorch")

    def empty(shape, dtype=None, device=None, pin_memory=False):
        dev.record("empty", str(device))
        assert device == "cpu" and pin_memory, "the host copy must be pinned for a non-blocking copy"
        return Tensor(dev, None, "cpu")

    lib.empty = empty
    lib.cuda = types.SimpleNamespace(
        Event=lambda: Event(dev, "cuda"),
        current_stream=lambda device=None: "stream",
        is_current_stream_capturing=lambda: False,
    )
    lib.Event = lambda device: Event(dev, device.type)
    return lib


@pytest.fixture
def dev(monkeypatch):
    """A device (its queue and call log) with faketorch importable as a library."""
    d = Device()
    monkeypatch.setitem(sys.modules, "faketorch", make_lib(d))
    return d


def tensor(dev: Device, value: float, device: str = "cuda", numel: int = 1) -> Tensor:
    return Tensor(dev, value, device, numel)


def values(run, tag: str) -> list[tuple[int, float]]:
    df = nb.RunReader(run.dir).scalars(tag).sort("step")
    return list(zip(df["step"].to_list(), df["value"].to_list(), strict=True))


def dropped(run) -> dict:
    (session,) = [s for s in nb.RunReader(run.dir).sessions() if s["session"] == run.session]
    return session["dropped"]


def started(make_run, **kwargs):
    """A run whose session has logged a point already (a float): from then on device
    values wait for the writer thread (the session's first point never does)."""
    run = make_run(**kwargs)
    run.add_scalar("start", 0.0, step=0)
    return run


def main_thread_syncs(dev: Device) -> list:
    return [c for c in dev.calls if c[0] in SYNCING and c[1] == threading.main_thread().name and c[2] != "cpu"]


# -- the training thread never waits for the device --------------------------------


@pytest.mark.parametrize("device", ["cuda", "xpu"])
def test_add_scalar_of_a_device_tensor_never_syncs_in_the_training_thread(make_run, dev, device):
    run = started(make_run)
    for step in range(20):
        run.add_scalar("loss", tensor(dev, 0.5 * step, device), step=step)
        run.add_scalar({"acc": tensor(dev, step + 0.25, device), "lr": 0.1}, step=step)
    assert main_thread_syncs(dev) == []
    assert not [c for c in dev.calls if c[1] == threading.main_thread().name and c[0] == "__float__"]
    assert dev.done == 0  # nothing ran on the device: nb only queued work
    dev.run()
    run.flush()
    assert values(run, "loss") == [(s, 0.5 * s) for s in range(20)]
    assert values(run, "acc") == [(s, s + 0.25) for s in range(20)]
    assert values(run, "lr") == [(s, 0.1) for s in range(20)]


def test_the_writer_thread_reads_the_copy_once_the_device_ran_it(make_run, dev):
    run = started(make_run, flush_interval=0.05)
    run.add_scalar("loss", tensor(dev, 1.5), step=0)
    dev.run()
    assert dev.converted.wait(30), "the writer thread never read the copy"
    readers = {c[1] for c in dev.calls if c[0] == "__float__"}
    assert readers == {"nblog-writer"}
    run.flush()
    assert values(run, "loss") == [(0, 1.5)]


def test_the_logged_value_is_the_one_at_the_call_not_after_an_in_place_update(make_run, dev):
    run = started(make_run)
    for device in ("cuda", "xpu"):
        t = tensor(dev, 1.0, device)
        tag = f"{device}/loss"
        run.add_scalar(tag, t, step=0)
        t.add_(1.0)  # queued after nb's copy: the copy still holds 1.0
        run.add_scalar({tag: t}, step=1)
        t.add_(40.0)
        dev.run()
        assert t._value == 42.0
        run.flush()
        assert values(run, tag) == [(0, 1.0), (1, 2.0)]


def test_nan_and_infinities_of_a_device_tensor_are_kept(make_run, dev):
    run = started(make_run)
    for step, v in enumerate([math.nan, math.inf, -math.inf, -0.0]):
        run.add_scalar("x", tensor(dev, v), step=step)
    dev.run()
    run.flush()
    got = [v for _s, v in values(run, "x")]
    assert math.isnan(got[0]) and got[1:3] == [math.inf, -math.inf]
    assert math.copysign(1.0, got[3]) == -1.0


def test_the_run_summary_holds_the_device_values(make_run, dev):
    run = started(make_run)
    for step in range(5):
        run.add_scalar("loss", tensor(dev, 10.0 - step), step=step)
    dev.run()
    run.finish()
    with open(os.path.join(run.dir, "run.json")) as f:
        entry = json.load(f)["summary"]["loss"]
    assert (entry["last"], entry["step"], entry["min"], entry["max"]) == (6.0, 4, 6.0, 10.0)


# -- flush and finish ----------------------------------------------------------------


def test_finish_writes_device_values_the_device_runs_while_finish_waits(make_run, dev):
    dev.progress_per_query = 1  # the device gets on with its queue while nb polls
    run = started(make_run)
    for step in range(10):
        run.add_scalar("loss", tensor(dev, float(step)), step=step)
    assert dev.done == 0
    run.finish()
    assert values(run, "loss") == [(s, float(s)) for s in range(10)]
    assert "device_timeout" not in dropped(run)
    assert main_thread_syncs(dev) == []  # finish polled the events, never blocked in the device


def test_flush_waits_for_the_device_values_logged_before_it(make_run, dev):
    dev.progress_per_query = 1  # the device gets on with its queue while nb polls
    run = started(make_run)
    for step in range(10):
        run.add_scalar({"loss": tensor(dev, step / 4)}, step=step)
    run.flush()
    assert values(run, "loss") == [(s, s / 4) for s in range(10)]
    assert main_thread_syncs(dev) == []


def test_device_values_from_several_threads_are_each_written_once(make_run, dev):
    dev.progress_per_query = 3  # the writer thread's polls move the device on
    run = started(make_run, flush_interval=0.01)
    n = 500

    def work(k: int) -> None:
        for i in range(n):
            run.add_scalar(f"t{k}", tensor(dev, float(k * n + i)), step=i)
            if i % 50 == 0:
                run.add_scalar({f"cpu{k}": float(i), f"d{k}": tensor(dev, float(-i))}, step=i)

    threads = [threading.Thread(target=work, args=(k,), name=f"train-{k}") for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    run.flush()
    for k in range(4):
        assert values(run, f"t{k}") == [(i, float(k * n + i)) for i in range(n)]
        assert values(run, f"d{k}") == [(i, float(-i)) for i in range(0, n, 50)]
    assert not [c for c in dev.calls if c[0] in SYNCING and c[1].startswith("train-") and c[2] != "cpu"]


@pytest.mark.timeout(60)
def test_a_device_that_never_runs_does_not_hang_finish(make_run, dev, caplog):
    dev.never = True
    run = started(make_run)
    for step in range(3):
        run.add_scalar("loss", tensor(dev, 1.0), step=step)
    run.add_scalar("lr", 0.5, step=2)
    run.flush(timeout=0.05)  # returns, though not everything could be written
    with caplog.at_level(logging.WARNING, logger="nblog"):
        run.finish(timeout=0.5)
    assert dropped(run).get("device_timeout") == 3
    assert values(run, "lr") == [(2, 0.5)]
    assert values(run, "loss") == []
    assert len([r for r in caplog.records if "device_timeout" in r.getMessage()]) == 1
    assert main_thread_syncs(dev) == []


def test_a_device_error_skips_the_value_counts_it_and_warns_once(make_run, dev, caplog, monkeypatch):
    run = started(make_run)
    bad = tensor(dev, 1.0)
    run.add_scalar("loss", bad, step=0)
    run.add_scalar("loss", tensor(dev, 2.0), step=1)
    run.add_scalar("loss", tensor(dev, 3.0), step=2)

    def broken(self):
        raise RuntimeError("device lost")

    monkeypatch.setattr(Event, "query", broken)
    with caplog.at_level(logging.WARNING, logger="nblog"):
        run.finish()
    assert dropped(run).get("device_error") == 3
    assert len([r for r in caplog.records if "device lost" in r.getMessage()]) == 1


# -- what is not captured goes through float() as before ---------------------------------


def test_a_cpu_tensor_is_converted_at_the_call_as_before(make_run, dev):
    run = started(make_run)
    run.add_scalar("x", tensor(dev, 4.5, "cpu"), step=0)
    assert ("__float__", threading.main_thread().name, "cpu") in dev.calls
    run.flush()
    assert values(run, "x") == [(0, 4.5)]


def test_a_real_cpu_torch_tensor_is_logged_exactly(make_run):
    torch = pytest.importorskip("torch")
    run = started(make_run)
    run.add_scalar("x", torch.tensor(0.1, dtype=torch.float64), step=0)
    run.add_scalar({"y": torch.tensor([2.5])}, step=1)
    run.flush()
    assert values(run, "x") == [(0, 0.1)] and values(run, "y") == [(1, 2.5)]


def test_a_cpu_tensor_that_requires_grad_is_logged_without_torchs_warning(make_run, recwarn):
    torch = pytest.importorskip("torch")
    run = started(make_run)
    w = torch.tensor(3.0, requires_grad=True)
    loss = w * 0.5
    run.add_scalar("loss", loss, step=1)
    run.add_scalar({"w": w}, step=1)
    run.flush()
    assert values(run, "loss") == [(1, 1.5)] and values(run, "w") == [(1, 3.0)]
    assert [str(r.message) for r in recwarn.list] == []


def test_a_real_torch_tensor_on_a_device_that_cannot_be_captured_goes_through_float(make_run, caplog):
    torch = pytest.importorskip("torch")
    run = started(make_run)
    with caplog.at_level(logging.WARNING, logger="nblog"):
        run.add_scalar("m", torch.tensor(1.0, device="meta"), step=1)  # no data, no events
    run.finish()
    assert values(run, "m") == []
    assert dropped(run) == {"bad_value": 1}
    assert len([r for r in caplog.records if "the point is skipped" in r.getMessage()]) == 1


class OddOnDevice:
    """Says it is on a device, has none of a tensor's methods; converts with float()."""

    device = FakeDeviceType("cuda")

    def __float__(self) -> float:
        return 7.0


class OddNoNumber:
    device = FakeDeviceType("cuda")


def test_an_object_that_cannot_be_captured_goes_through_float_with_the_usual_warning(make_run, caplog):
    run = started(make_run)
    run.add_scalar("odd", OddOnDevice(), step=0)
    with caplog.at_level(logging.WARNING, logger="nblog"):
        for step in (1, 2):  # one call site: one warning
            run.add_scalar("odd", OddNoNumber(), step=step)
    run.finish()  # the counters are in the END record
    assert values(run, "odd") == [(0, 7.0)]
    assert len([r for r in caplog.records if "the point is skipped" in r.getMessage()]) == 1
    assert dropped(run) == {"bad_value": 2}


def test_a_device_tensor_of_several_elements_is_refused_as_before(make_run, dev, caplog):
    run = started(make_run)
    with caplog.at_level(logging.WARNING, logger="nblog"):
        run.add_scalar("v", tensor(dev, 1.0, numel=3), step=0)
    run.finish()
    assert values(run, "v") == []
    assert dropped(run) == {"bad_value": 1}
    assert not [c for c in dev.calls if c[0] in ("copy_", "clone", "Event.record")]


# -- order: the session's first step, a step lower than the tag's highest ----------------


def test_a_resumed_session_whose_first_point_is_a_device_value_still_hides_the_earlier_steps(make_run, dev):
    first = make_run(run_id="gpu-00000001")
    for step in range(10):
        first.add_scalar("loss", 100.0 + step, step=step)
    first.finish()
    run = make_run(run_id="gpu-00000001", resume="auto")
    run.add_scalar("loss", tensor(dev, 5.5), step=5)  # restarted from the step-5 checkpoint
    run.add_scalar("lr", 0.1, step=7)  # a CPU value logged later, at a higher step
    run.flush(timeout=0.05)  # written while the device has not run yet
    dev.run()
    run.flush()
    assert [s["first_step"] for s in nb.RunReader(run.dir).sessions()] == [0, 5]
    assert values(run, "loss") == [(0, 100.0), (1, 101.0), (2, 102.0), (3, 103.0), (4, 104.0), (5, 5.5)]


def test_the_sessions_first_point_alone_is_converted_at_once_when_it_is_a_device_value(make_run, dev):
    run = make_run()
    run.add_scalar("loss", tensor(dev, 1.25), step=0)  # sets the session's first step: not left pending
    assert [c[0] for c in main_thread_syncs(dev)] == ["__float__"]
    for step in range(1, 4):
        run.add_scalar("loss", tensor(dev, 1.25 + step), step=step)
    assert len(main_thread_syncs(dev)) == 1
    dev.run()
    run.flush()
    assert values(run, "loss") == [(s, 1.25 + s) for s in range(4)]


def test_a_device_value_below_the_tags_highest_step_warns_as_a_float_does(make_run, dev, caplog):
    run = started(make_run)
    run.add_scalar("loss", 1.0, step=5)
    with caplog.at_level(logging.WARNING, logger="nblog"):
        run.add_scalar("loss", tensor(dev, 2.0), step=3)
    assert len([r for r in caplog.records if "lower than its step 5" in r.getMessage()]) == 1
    dev.run()
    run.flush()
    assert values(run, "loss") == [(3, 2.0), (5, 1.0)]


def test_a_device_value_that_cannot_be_captured_is_converted_counted_and_warned_once(make_run, caplog):
    """The fallback to float() waits for the device: it must not happen silently."""
    run = started(make_run)
    with caplog.at_level(logging.WARNING, logger="nblog"):
        for step in (1, 2):
            run.add_scalar("odd", OddOnDevice(), step=step)
    run.finish()
    assert values(run, "odd") == [(1, 7.0), (2, 7.0)]
    assert run.device_syncs == 2
    assert len([r for r in caplog.records if "could not be copied without waiting" in r.getMessage()]) == 1
