"""System metrics (nblog.system._system, nblog.system._nvml): real psutil, a fake pynvml."""

from __future__ import annotations

import importlib.util
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

import nblog as nb
from nblog.system._nvml import parse_cuda_visible_devices
from nblog.system._system import Sampler

pytestmark = pytest.mark.timing  # run again beside a CPU hog: scripts/test_loaded.sh

FAKES = Path(__file__).resolve().parents[1] / "fakes"
REPO = Path(__file__).resolve().parents[2]

CPU = {"system/cpu_percent"}
MEMORY = {
    "system/memory_used_bytes",
    "system/memory_available_bytes",
    "system/memory_percent",
    "system/process_rss_bytes",
}
DISK = {"system/disk_read_bytes_per_s", "system/disk_write_bytes_per_s"}
NETWORK = {"system/net_recv_bytes_per_s", "system/net_sent_bytes_per_s"}


@pytest.fixture
def fake_nvml(monkeypatch):
    """The fake pynvml, importable as ``pynvml`` for this test only."""
    spec = importlib.util.spec_from_file_location("pynvml", FAKES / "pynvml.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    return module


def gpu_values(values: dict) -> dict:
    return {k: v for k, v in values.items() if k.startswith("system/gpu")}


def expected_gpus(fake, physical: list[int]) -> dict:
    return {
        f"system/gpu{i}/{k}": v for i, j in enumerate(physical) for k, v in fake.expected(j).items()
    }


def sample_twice(groups, env, pause: float = 0.02) -> tuple[Sampler, dict, dict]:
    s = Sampler(groups, env)
    s.open()
    first = s.sample()
    time.sleep(pause)  # rates need two samples some time apart
    second = s.sample()
    return s, first, second


def wait_for_system(run, tags: set[str], timeout: float = 10.0):
    """Flush until the run's event log holds every tag of ``tags`` as system points."""
    deadline = time.monotonic() + timeout
    while True:
        run.flush()
        df = nb.RunReader(run.dir).system()
        if tags <= set(df["tag"].to_list()):
            return df
        assert time.monotonic() < deadline, f"no system samples with {tags} after {timeout} s"
        time.sleep(0.02)


# -- import cost --------------------------------------------------------------------


def test_import_nblog_loads_neither_psutil_nor_pynvml():
    code = "import sys, nblog; print(sorted(m for m in ('psutil', 'pynvml') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]"


# -- CUDA_VISIBLE_DEVICES ----------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("", []),
        ("  ", []),
        ("0", [0]),
        ("2,0", [2, 0]),
        (" 1 , 3 ", [1, 3]),
        ("1,-1,2", [1]),
        ("-1", []),
        ("NoDevFiles", []),
        ("0,0", []),
        ("1gpu,2", [1, 2]),
        ("GPU-abc,GPU-def", ["GPU-abc", "GPU-def"]),
        ("GPU-abc,3", ["GPU-abc"]),
        ("MIG-abc,MIG-GPU-x/1/0", ["MIG-abc", "MIG-GPU-x/1/0"]),
        ("GPU-abc,GPU-abc", []),
    ],
)
def test_parse_cuda_visible_devices(value, expected):
    assert parse_cuda_visible_devices(value) == expected


# -- GPUs through the fake NVML ----------------------------------------------------


def test_gpus_follow_cuda_visible_devices_uuids_with_exact_values(fake_nvml):
    fake_nvml.configure(gpus=4, no_power={1})
    env = {"CUDA_VISIBLE_DEVICES": f"{fake_nvml.uuid(3)},{fake_nvml.uuid(1)}", "NB_HOSTNAME": "m7"}
    s, first, second = sample_twice(("gpu",), env)
    assert first == second == expected_gpus(fake_nvml, [3, 1])
    # physical GPU 1 is gpu1 here; it refuses power, so neither power key exists
    assert "system/gpu1/power_w" not in second and "system/gpu0/power_w" in second
    assert second["system/gpu1/throttle_thermal"] == 1.0
    assert second["system/gpu1/throttle_reasons"] == 0x24
    machine = s.machine()
    assert machine["hostname"] == "m7"
    assert machine["driver_version"] == fake_nvml.DRIVER
    assert machine["gpu_note"] is None
    assert [(g["index"], g["uuid"], g["nvml_index"]) for g in machine["gpus"]] == [
        (0, fake_nvml.uuid(3), 3),
        (1, fake_nvml.uuid(1), 1),
    ]
    assert {g["memory_total_bytes"] for g in machine["gpus"]} == {80 * fake_nvml.GIB}
    s.close()
    assert fake_nvml.calls[("nvmlShutdown", None)] == 1


def test_a_refused_metric_is_not_asked_again(fake_nvml):
    fake_nvml.configure(gpus=2, no_power={1})
    s = Sampler(("gpu",), {})
    s.open()
    for _ in range(3):
        values = s.sample()
    assert values == expected_gpus(fake_nvml, [0, 1])
    assert fake_nvml.calls[("nvmlDeviceGetPowerUsage", 1)] == 1
    assert fake_nvml.calls[("nvmlDeviceGetPowerUsage", 0)] == 3
    s.close()


def test_eight_gpus_without_cuda_visible_devices(fake_nvml):
    fake_nvml.configure(gpus=8)
    s, _, values = sample_twice(("gpu",), {})
    assert values == expected_gpus(fake_nvml, list(range(8)))
    s.close()


@pytest.mark.parametrize(
    ("visible", "physical"),
    [("2,0", [2, 0]), ("3", [3]), ("1,7,0", [1]), ("GPU-00000002", [2])],
)
def test_gpus_follow_cuda_visible_devices_indices_and_prefixes(fake_nvml, visible, physical):
    fake_nvml.configure(gpus=4)
    s, _, values = sample_twice(("gpu",), {"CUDA_VISIBLE_DEVICES": visible})
    assert values == expected_gpus(fake_nvml, physical)
    s.close()


@pytest.mark.parametrize("visible", ["", "-1", "0,0", "GPU-0000000", "GPU-ffff"])
def test_no_visible_gpu_means_no_gpu_keys(fake_nvml, visible):
    fake_nvml.configure(gpus=4)
    s, first, second = sample_twice(("gpu",), {"CUDA_VISIBLE_DEVICES": visible})
    assert first == second == {}
    assert s.machine()["gpus"] == [] and s.machine()["gpu_note"]
    s.close()
    assert fake_nvml.calls[("nvmlInit", None)] == fake_nvml.calls[("nvmlShutdown", None)] == 1


@pytest.mark.parametrize("style", ["new", "old"])
def test_mig_devices(fake_nvml, style):
    fake_nvml.configure(gpus=2, mig={1: [(1, 0), (2, 0)]})
    ident = fake_nvml.mig_uuid(1, 1) if style == "new" else f"MIG-{fake_nvml.uuid(1)}/2/0"
    s, _, values = sample_twice(("gpu",), {"CUDA_VISIBLE_DEVICES": ident})
    gib = fake_nvml.GIB
    assert values == {  # a MIG device answers memory and refuses the rest
        "system/gpu0/memory_used_bytes": gib / 2,
        "system/gpu0/memory_total_bytes": 10.0 * gib,
        "system/gpu0/memory_percent": 5.0,
    }
    (gpu,) = s.machine()["gpus"]
    assert gpu["mig"] is True and gpu["uuid"] == fake_nvml.mig_uuid(1, 1)
    s.close()


def test_a_failing_gpu_warns_once_and_is_asked_again(fake_nvml, caplog):
    fake_nvml.configure(gpus=2, lost={0})
    s = Sampler(("gpu",), {})
    s.open()
    with caplog.at_level(logging.WARNING, logger="nblog"):
        for _ in range(3):
            values = s.sample()
    expected = expected_gpus(fake_nvml, [0, 1])
    del expected["system/gpu0/utilization_percent"]
    assert values == expected
    assert fake_nvml.calls[("nvmlDeviceGetUtilizationRates", 0)] == 3
    assert len([r for r in caplog.records if "GPU is lost" in r.getMessage()]) == 1
    s.close()


# -- no NVML ----------------------------------------------------------------------


def test_without_pynvml_the_gpu_group_is_absent(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    with caplog.at_level(logging.INFO, logger="nblog"):
        s, first, second = sample_twice(("cpu", "gpu"), {})
    assert set(first) == set(second) == CPU
    assert s.machine()["gpus"] == [] and "pynvml" in s.machine()["gpu_note"]
    assert len([r for r in caplog.records if "no GPU metrics" in r.getMessage()]) == 1
    s.close()


def test_without_driver_the_gpu_group_is_absent(fake_nvml):
    fake_nvml.configure(gpus=2, init_error=fake_nvml.NVML_ERROR_DRIVER_NOT_LOADED)
    s, first, second = sample_twice(("gpu", "memory"), {})
    assert set(first) == set(second) == MEMORY
    assert "Driver Not Loaded" in s.machine()["gpu_note"]
    s.close()
    assert fake_nvml.calls[("nvmlShutdown", None)] == 0


def test_real_pynvml_without_nvidia_driver_logs_no_gpu_keys():
    pynvml = pytest.importorskip("pynvml")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:
        pynvml.nvmlShutdown()
        pytest.skip("this machine has a working NVIDIA driver")
    s, first, second = sample_twice(("cpu", "gpu"), {})
    assert not gpu_values(first) and not gpu_values(second)
    assert s.machine()["gpus"] == []
    s.close()


# -- psutil groups ----------------------------------------------------------------


def test_psutil_groups_and_rates_from_the_second_sample():
    groups = ("cpu", "memory", "disk", "network")
    s, first, second = sample_twice(groups, {})
    disk = DISK if psutil.disk_io_counters() is not None else set()
    assert set(first) == CPU | MEMORY  # no rate without a previous sample
    assert set(second) == CPU | MEMORY | disk | NETWORK
    assert all(v >= 0 for v in second.values())
    assert 0 <= second["system/cpu_percent"] <= 100
    assert second["system/process_rss_bytes"] == pytest.approx(psutil.Process().memory_info().rss, rel=0.5)
    machine = s.machine()
    assert machine["cpu_count"] == psutil.cpu_count()
    assert machine["memory_total_bytes"] == psutil.virtual_memory().total
    assert machine["gpus"] == [] and machine["gpu_note"] == "gpu group off"
    s.close()


@pytest.mark.parametrize(
    ("groups", "keys"),
    [(("cpu",), CPU), (("memory",), MEMORY), (("network",), NETWORK), ((), set())],
)
def test_only_the_chosen_groups_are_sampled(groups, keys):
    _, _, second = sample_twice(groups, {})
    assert set(second) == keys


def test_a_failing_psutil_call_warns_once_and_the_rest_goes_on(monkeypatch, caplog):
    def broken():
        raise OSError("no /proc/meminfo")

    monkeypatch.setattr(psutil, "virtual_memory", broken)
    s = Sampler(("cpu", "memory"), {})
    s.open()
    with caplog.at_level(logging.WARNING, logger="nblog"):
        samples = [s.sample() for _ in range(3)]
    assert all(set(v) == CPU for v in samples)
    assert len([r for r in caplog.records if "memory" in r.getMessage()]) == 1


def test_sample_cost_without_gpus_is_below_5_ms():
    s = Sampler(("cpu", "memory", "disk", "network"), {})
    s.open()
    s.sample()
    costs = []
    for _ in range(30):
        t = time.perf_counter()
        s.sample()
        costs.append(time.perf_counter() - t)
    assert sorted(costs)[len(costs) // 2] < 0.005


# -- the thread, through init -----------------------------------------------------


def system_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "nblog-system"]


def test_init_samples_into_the_event_log_and_finish_stops(fake_nvml, tmp_path):
    fake_nvml.configure(gpus=2, no_power={1})
    env = {"NB_HOSTNAME": "machine7", "NB_SYSTEM_INTERVAL": "0.05"}
    run = nb.init("sys", root=tmp_path, _environ=env)
    assert len(system_threads()) == 1
    run.add_scalar("loss", 1.0, step=42)
    gpu_keys = set(expected_gpus(fake_nvml, [0, 1]))
    df = wait_for_system(run, CPU | MEMORY | NETWORK | gpu_keys)
    run.finish()
    assert system_threads() == []
    assert fake_nvml.calls[("nvmlInit", None)] == fake_nvml.calls[("nvmlShutdown", None)] == 1
    df = nb.RunReader(run.dir).system()
    assert set(df["hostname"]) == {"machine7"} and set(df["rank"]) == {0}
    assert {t for t in df["tag"] if t.startswith("system/gpu")} == gpu_keys
    last = df.filter(df["tag"] == "system/gpu1/temperature_c")
    assert last["value"].to_list()[-1] == 41.0 and last["step"].to_list()[-1] == 42
    (machine,) = nb.RunReader(run.dir).machines()
    assert machine["hostname"] == "machine7"
    assert [g["uuid"] for g in machine["gpus"]] == [fake_nvml.uuid(0), fake_nvml.uuid(1)]


def test_nb_system_selects_groups(fake_nvml, tmp_path):
    env = {"NB_SYSTEM": "cpu", "NB_SYSTEM_INTERVAL": "0.05"}
    run = nb.init("sys", root=tmp_path, _environ=env)
    wait_for_system(run, CPU)
    run.finish()
    assert set(nb.RunReader(run.dir).system()["tag"]) == CPU
    assert fake_nvml.calls[("nvmlInit", None)] == 0  # gpu group off: NVML never touched


def test_system_false_starts_no_thread(tmp_path):
    run = nb.init("sys", root=tmp_path, system=False, _environ={})
    assert system_threads() == []
    run.finish()


def test_finish_stops_a_sleeping_sampler_at_once(fake_nvml, tmp_path):
    run = nb.init("sys", root=tmp_path, system_interval=3600, _environ={})
    t = time.perf_counter()
    run.finish()
    assert time.perf_counter() - t < 0.5
    assert system_threads() == []
    assert fake_nvml.calls[("nvmlInit", None)] == fake_nvml.calls[("nvmlShutdown", None)]


def test_first_sample_comes_after_at_most_one_second(tmp_path):
    run = nb.init("sys", root=tmp_path, system=["cpu"], system_interval=3600, _environ={})
    t = time.monotonic()
    wait_for_system(run, CPU, timeout=5)
    assert time.monotonic() - t < 2.0
    run.finish()


def test_forked_child_has_no_sampler(tmp_path):
    if not hasattr(os, "fork"):
        pytest.skip("no fork")
    run = nb.init("sys", root=tmp_path, system=["cpu"], system_interval=3600, _environ={})
    pid = os.fork()
    if pid == 0:  # child: no thread survives fork; finish must not touch the parent's files
        code = 0 if not system_threads() else 1
        run.finish()
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    run.finish()
    assert os.waitstatus_to_exitcode(status) == 0
