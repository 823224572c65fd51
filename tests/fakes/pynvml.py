"""A fake ``pynvml`` (nvidia-ml-py) for tests: deterministic GPUs, no driver needed.

Tests only. In-process, load it under the name ``pynvml`` into ``sys.modules`` and call
:func:`configure`; for subprocesses put ``tests/fakes`` first on ``PYTHONPATH`` and set
``NB_FAKE_NVML_GPUS`` (number of GPUs, default 2), ``NB_FAKE_NVML_NO_POWER`` (comma list
of physical indices that answer "not supported" for power) and ``NB_FAKE_NVML_INIT_ERROR``
(an NVML error code ``nvmlInit`` raises, e.g. 9 = driver not loaded).

Physical GPU ``j`` reports (see :func:`expected`):
utilization ``10*j + 5`` %, memory used ``(j+1)`` GiB of 80 GiB, temperature ``40+j`` °C,
power ``100 + j`` W of a 700 W limit, SM clock ``1000 + 10*j`` MHz, memory clock 2619 MHz,
throttle reasons 0x24 (SW thermal + SW power cap) on GPU 1, 0x1 (idle) elsewhere.
MIG devices (``configure(mig={j: [(gi, ci), ...]})``) answer memory and refuse the rest.
``calls`` counts every call as ``(function name, physical index or uuid)``.
"""

from __future__ import annotations

import os
from collections import Counter
from types import SimpleNamespace

NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_UNKNOWN = 999
NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2

GIB = 1 << 30
DRIVER = "550.54.15"


class NVMLError(Exception):
    def __init__(self, value: int):
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return {3: "Not Supported", 6: "Not Found", 9: "Driver Not Loaded",
                12: "NVML Shared Library Not Found", 15: "GPU is lost"}.get(self.value, f"NVML error {self.value}")


class NVMLError_NotSupported(NVMLError):  # noqa: N801 (pynvml's naming)
    def __init__(self):
        super().__init__(NVML_ERROR_NOT_SUPPORTED)


class _Dev:
    def __init__(self, index: int, uuid: str, parent=None, gi=None, ci=None):
        self.index, self.uuid, self.parent, self.gi, self.ci = index, uuid, parent, gi, ci
        self.migs: list = []

    @property
    def key(self):
        return self.index if self.parent is None else self.uuid

    def __repr__(self) -> str:
        return f"<fake nvml device {self.key}>"


def uuid(j: int) -> str:
    """The UUID of physical GPU ``j``."""
    return f"GPU-{j:08x}-fa6e-4e0d-8c1b-{0xabc000 + j:012x}"


def mig_uuid(j: int, k: int) -> str:
    return f"MIG-{j:04x}{k:04x}-51a0-4e0d-9c2b-{0xdef000 + j * 16 + k:012x}"


state = SimpleNamespace(devices=[], no_power=set(), init_error=None, initialised=0, lost=set())
calls: Counter = Counter()


def configure(gpus: int = 2, no_power=(), init_error: int | None = None, mig=None, lost=()) -> None:
    """Reset the fake: ``gpus`` physical GPUs; ``no_power`` indices refuse power;
    ``init_error`` makes nvmlInit raise; ``mig`` = {j: [(gi, ci), ...]}; ``lost`` indices
    raise GPU_IS_LOST on utilization."""
    state.devices = [_Dev(j, uuid(j)) for j in range(gpus)]
    for j, instances in (mig or {}).items():
        parent = state.devices[j]
        parent.migs = [_Dev(j, mig_uuid(j, k), parent, gi, ci) for k, (gi, ci) in enumerate(instances)]
    state.no_power = set(no_power)
    state.init_error = init_error
    state.initialised = 0
    state.lost = set(lost)
    calls.clear()


def expected(j: int) -> dict[str, float]:
    """The values physical GPU ``j`` reports, under the sampler's key names."""
    reasons = 0x24 if j == 1 else 0x1
    out = {
        "utilization_percent": 10.0 * j + 5,
        "memory_used_bytes": float((j + 1) * GIB),
        "memory_total_bytes": float(80 * GIB),
        "memory_percent": (j + 1) / 80 * 100,
        "temperature_c": 40.0 + j,
        "power_w": 100.0 + j,
        "power_limit_w": 700.0,
        "sm_clock_mhz": 1000.0 + 10 * j,
        "memory_clock_mhz": 2619.0,
        "throttle_reasons": float(reasons),
        "throttle_thermal": 1.0 if j == 1 else 0.0,
        "throttle_power_cap": 1.0 if j == 1 else 0.0,
        "throttle_hw_slowdown": 0.0,
    }
    if j in state.no_power:
        del out["power_w"], out["power_limit_w"]
    return out


def _env_config() -> None:
    no_power = os.environ.get("NB_FAKE_NVML_NO_POWER", "")
    err = os.environ.get("NB_FAKE_NVML_INIT_ERROR", "")
    configure(
        gpus=int(os.environ.get("NB_FAKE_NVML_GPUS", "2")),
        no_power={int(x) for x in no_power.split(",") if x.strip()},
        init_error=int(err) if err else None,
    )


_env_config()


def _check(h: _Dev, fn: str) -> _Dev:
    calls[(fn, h.key)] += 1
    if not state.initialised:
        raise NVMLError(1)
    return h


def _physical_only(h: _Dev) -> None:
    if h.parent is not None:
        raise NVMLError_NotSupported()


# -- the pynvml functions the sampler uses -------------------------------------------


def nvmlInit() -> None:
    calls[("nvmlInit", None)] += 1
    if state.init_error is not None:
        raise NVMLError(state.init_error)
    state.initialised += 1


def nvmlShutdown() -> None:
    calls[("nvmlShutdown", None)] += 1
    if not state.initialised:
        raise NVMLError(1)
    state.initialised -= 1


def nvmlSystemGetDriverVersion() -> str:
    return DRIVER


def nvmlSystemGetCudaDriverVersion() -> int:
    return 12040


def nvmlDeviceGetCount() -> int:
    return len(state.devices)


def nvmlDeviceGetHandleByIndex(i: int) -> _Dev:
    if not 0 <= i < len(state.devices):
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return state.devices[i]


def nvmlDeviceGetHandleByUUID(u) -> _Dev:
    u = u.decode() if isinstance(u, bytes) else u
    for d in state.devices:
        if d.uuid == u:
            return d
        for m in d.migs:
            if m.uuid == u:
                return m
    raise NVMLError(NVML_ERROR_NOT_FOUND)


def nvmlDeviceGetIndex(h: _Dev) -> int:
    _physical_only(h)
    return h.index


def nvmlDeviceGetName(h: _Dev) -> str:
    return "NVIDIA Fake H100 80GB HBM3" if h.parent is None else "NVIDIA Fake H100 MIG 1g.10gb"


def nvmlDeviceGetUUID(h: _Dev) -> str:
    return h.uuid


def nvmlDeviceGetUtilizationRates(h: _Dev):
    _check(h, "nvmlDeviceGetUtilizationRates")
    _physical_only(h)
    if h.index in state.lost:
        raise NVMLError(NVML_ERROR_GPU_IS_LOST)
    return SimpleNamespace(gpu=10 * h.index + 5, memory=7)


def nvmlDeviceGetMemoryInfo(h: _Dev):
    _check(h, "nvmlDeviceGetMemoryInfo")
    if h.parent is not None:
        return SimpleNamespace(total=10 * GIB, used=GIB // 2, free=10 * GIB - GIB // 2)
    used = (h.index + 1) * GIB
    return SimpleNamespace(total=80 * GIB, used=used, free=80 * GIB - used)


def nvmlDeviceGetTemperature(h: _Dev, sensor: int) -> int:
    _check(h, "nvmlDeviceGetTemperature")
    _physical_only(h)
    return 40 + h.index


def nvmlDeviceGetPowerUsage(h: _Dev) -> int:
    _check(h, "nvmlDeviceGetPowerUsage")
    _physical_only(h)
    if h.index in state.no_power:
        raise NVMLError_NotSupported()
    return (100 + h.index) * 1000


def nvmlDeviceGetEnforcedPowerLimit(h: _Dev) -> int:
    _check(h, "nvmlDeviceGetEnforcedPowerLimit")
    _physical_only(h)
    if h.index in state.no_power:
        raise NVMLError_NotSupported()
    return 700_000


def nvmlDeviceGetClockInfo(h: _Dev, clock: int) -> int:
    _check(h, "nvmlDeviceGetClockInfo")
    _physical_only(h)
    return 1000 + 10 * h.index if clock == NVML_CLOCK_SM else 2619


def nvmlDeviceGetCurrentClocksThrottleReasons(h: _Dev) -> int:
    _check(h, "nvmlDeviceGetCurrentClocksThrottleReasons")
    _physical_only(h)
    return 0x24 if h.index == 1 else 0x1


def nvmlDeviceGetMaxMigDeviceCount(h: _Dev) -> int:
    return 7 if h.migs else 0


def nvmlDeviceGetMigDeviceHandleByIndex(h: _Dev, k: int) -> _Dev:
    if k < len(h.migs):
        return h.migs[k]
    raise NVMLError(NVML_ERROR_NOT_FOUND)


def nvmlDeviceGetGpuInstanceId(h: _Dev) -> int:
    return h.gi


def nvmlDeviceGetComputeInstanceId(h: _Dev) -> int:
    return h.ci
