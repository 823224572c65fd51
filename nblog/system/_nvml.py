"""GPU metrics through NVML (the ``pynvml`` module of nvidia-ml-py), for the system sampler.

``pynvml`` is imported, and NVML initialised, only when :meth:`Gpus.open` runs (in the
sampler thread), once; :meth:`Gpus.close` shuts NVML down. Without ``pynvml``, without
the NVIDIA driver or without a visible GPU, ``open`` returns False and says why in
``Gpus.note``: the GPU group is then absent, never logged as zeros.

Visible GPUs follow ``CUDA_VISIBLE_DEVICES`` as CUDA reads it (integer indices, GPU UUIDs
or unique prefixes of them, ``MIG-<uuid>`` and ``MIG-GPU-<uuid>/<gi>/<ci>``); the ``i`` of
``system/gpu{i}/...`` is the position in that list (the CUDA device index of the
process), or the NVML index when the variable is not set. Integer indices are taken as
NVML (PCI bus) order, which is CUDA's order under ``CUDA_DEVICE_ORDER=PCI_BUS_ID``.

Per-GPU metrics are a table of probes (:data:`METRICS`); a probe that NVML refuses on a
device (not supported, no permission, function missing) is dropped for that device and
never asked again; any other NVML error is warned once per (metric, error) and retried
at the next sample.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .. import _log as log

# NVML return codes (nvml.h): stable ABI values, also in pynvml as NVML_ERROR_*.
_INVALID_ARGUMENT = 2
_NOT_SUPPORTED = 3
_NO_PERMISSION = 4
_NOT_FOUND = 6
_FUNCTION_NOT_FOUND = 13
_DEPRECATED = 26
_REFUSED = frozenset({_INVALID_ARGUMENT, _NOT_SUPPORTED, _NO_PERMISSION, _FUNCTION_NOT_FOUND, _DEPRECATED})

_TEMPERATURE_GPU = 0  # NVML_TEMPERATURE_GPU
_CLOCK_SM = 1  # NVML_CLOCK_SM
_CLOCK_MEM = 2  # NVML_CLOCK_MEM

# Clock event ("throttle") reasons (nvmlClocksEventReason*): bits of the bitmask.
_SW_POWER_CAP = 0x4
_HW_SLOWDOWN = 0x8
_SW_THERMAL = 0x20
_HW_THERMAL = 0x40
_HW_POWER_BRAKE = 0x80

#: Per-GPU keys (after ``system/gpu{i}/``), their unit and meaning; what docs list.
METRICS = {
    "utilization_percent": "percent of time a kernel ran in the last sample period",
    "memory_used_bytes": "device memory in use",
    "memory_total_bytes": "device memory in total",
    "memory_percent": "memory_used_bytes / memory_total_bytes * 100",
    "temperature_c": "GPU core temperature, degrees Celsius",
    "power_w": "power draw, watts",
    "power_limit_w": "enforced power limit, watts",
    "sm_clock_mhz": "SM clock, MHz",
    "memory_clock_mhz": "memory clock, MHz",
    "throttle_reasons": "NVML clock event reasons bitmask (nvmlClocksEventReason*)",
    "throttle_thermal": "1 when slowed for temperature (SW or HW thermal slowdown), else 0",
    "throttle_power_cap": "1 when held at the power cap (SW power cap or HW power brake), else 0",
    "throttle_hw_slowdown": "1 when HW slowdown is engaged, else 0",
}


def parse_cuda_visible_devices(value: str | None) -> list[int | str] | None:
    """Parse ``CUDA_VISIBLE_DEVICES`` as CUDA does.

    Returns None when unset (every GPU visible), else the visible devices in order:
    ints (NVML indices) or strings (UUIDs, UUID prefixes, MIG ids). As in CUDA, the
    list stops at the first entry that is invalid (``-1``, ``none``, a token without
    a leading number), and a repeated entry hides every device (``[]``).
    """
    if value is None:
        return None
    value = value.strip()
    if not value:
        return []
    tokens = [t.strip() for t in value.split(",")]
    out: list[int | str] = []
    if tokens[0].startswith(("GPU-", "MIG-")):
        for t in tokens:
            if not t.startswith(("GPU-", "MIG-")):
                break
            if t in out:
                return []
            out.append(t)
        return out
    for t in tokens:
        digits = len(t) - len(t.lstrip("0123456789"))
        if digits == 0:  # "-1", "", "none": CUDA stops here
            break
        n = int(t[:digits])
        if n in out:
            return []
        out.append(n)
    return out


def _s(x: object) -> str:
    return x.decode("utf-8", "replace") if isinstance(x, bytes) else str(x)


class _Device:
    __slots__ = ("index", "handle", "prefix", "probes", "info")

    def __init__(self, index: int, handle: Any, probes: list, info: dict) -> None:
        self.index = index
        self.handle = handle
        self.prefix = f"system/gpu{index}/"
        self.probes = probes
        self.info = info


class Gpus:
    """The GPUs visible to this process, sampled through NVML.

    Args:
        warn: ``warn(key, message)`` called for failures; the caller warns once per key.

    Not thread-safe: one sampler thread uses it.
    """

    def __init__(self, warn: Callable[[tuple, str], None]) -> None:
        self._warn = warn
        self._nv: Any = None  # the pynvml module, once open() imported it
        self.devices: list[_Device] = []
        self.driver_version: str | None = None
        self.cuda_driver_version: str | None = None
        self.note: str | None = None

    def open(self, env: Mapping[str, str]) -> bool:
        """Import pynvml, initialise NVML, find the visible GPUs. True if there are any."""
        try:
            import pynvml as nv
        except ImportError as err:
            self.note = f"pynvml (nvidia-ml-py) cannot be imported: {err}"
            return False
        try:
            nv.nvmlInit()
        except Exception as err:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
            self.note = f"NVML is not available: {err}"
            return False
        self._nv = nv
        try:
            handles = self._visible(nv, env.get("CUDA_VISIBLE_DEVICES"))
            if not handles:
                if self.note is None:
                    self.note = "no GPU visible to this process"
                self.close()
                return False
            try:
                self.driver_version = _s(nv.nvmlSystemGetDriverVersion())
            except Exception:
                self.driver_version = None
            try:
                v = int(nv.nvmlSystemGetCudaDriverVersion())
                self.cuda_driver_version = f"{v // 1000}.{v % 1000 // 10}"
            except Exception:
                self.cuda_driver_version = None
            probes = _probes(nv, _reasons_function(nv, handles[0]))
            self.devices = [
                _Device(i, h, list(probes), self._describe(nv, i, h)) for i, h in enumerate(handles)
            ]
        except Exception as err:
            self.note = f"NVML failed while listing GPUs: {err!r}"
            self.close()
            return False
        return True

    def close(self) -> None:
        """Shut NVML down (once; safe to call again)."""
        nv, self._nv = self._nv, None
        self.devices = []
        if nv is not None:
            try:
                nv.nvmlShutdown()
            except Exception as err:
                log.debug("nblog: nvmlShutdown failed: %r", err)

    def machine(self) -> list[dict]:
        """``[{index, name, uuid, memory_total_bytes, ...}]`` for the machine record."""
        return [d.info for d in self.devices]

    def sample(self, out: dict[str, float]) -> None:
        """Add every metric of every visible GPU to ``out``."""
        nv = self._nv
        if nv is None:
            return
        error = nv.NVMLError
        for dev in self.devices:
            refused = None
            for probe in dev.probes:
                name, fn = probe
                try:
                    fn(dev.handle, dev.prefix, out)
                except error as err:
                    code = getattr(err, "value", None)
                    if code in _REFUSED:
                        refused = (refused or []) + [probe]
                        log.debug("nblog: NVML refuses %s on gpu%d (%s); not asked again", name, dev.index, err)
                    else:
                        self._warn(
                            ("nvml", name, code),
                            f"nblog: NVML failed reading {name} of gpu{dev.index}: {err}; "
                            "skipped this time, the sampler goes on",
                        )
                except Exception as err:  # an older pynvml without the function, ...
                    refused = (refused or []) + [probe]
                    self._warn(
                        ("nvml-api", name, type(err)),
                        f"nblog: cannot read {name} of gpu{dev.index} ({err!r}); not asked again",
                    )
            if refused:
                dev.probes = [p for p in dev.probes if p not in refused]

    # -- finding the visible GPUs ----------------------------------------------------

    def _visible(self, nv: Any, value: str | None) -> list:
        spec = parse_cuda_visible_devices(value)
        count = nv.nvmlDeviceGetCount()
        if spec is None:
            return [nv.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        if not spec:
            self.note = f"CUDA_VISIBLE_DEVICES={value!r} hides every GPU"
            return []
        handles = []
        for item in spec:
            if isinstance(item, int):
                h = nv.nvmlDeviceGetHandleByIndex(item) if item < count else None
            else:
                h = _by_uuid(nv, item, count)
            if h is None:  # CUDA ignores this entry and everything after it
                self._warn(
                    ("visible", item),
                    f"nblog: CUDA_VISIBLE_DEVICES entry {item!r} matches no GPU; "
                    "the GPUs after it are not sampled either (as in CUDA)",
                )
                break
            handles.append(h)
        return handles

    @staticmethod
    def _describe(nv: Any, index: int, h: Any) -> dict:
        info: dict = {"index": index}
        for key, call in (
            ("name", lambda: _s(nv.nvmlDeviceGetName(h))),
            ("uuid", lambda: _s(nv.nvmlDeviceGetUUID(h))),
            ("memory_total_bytes", lambda: int(nv.nvmlDeviceGetMemoryInfo(h).total)),
            ("nvml_index", lambda: int(nv.nvmlDeviceGetIndex(h))),
        ):
            try:
                info[key] = call()
            except Exception:
                info[key] = None
        info["mig"] = str(info.get("uuid") or "").startswith("MIG-")
        return info


def _by_uuid(nv: Any, ident: str, count: int) -> Any:
    """The handle of the GPU or MIG device named by a UUID, a unique prefix, or
    ``MIG-GPU-<uuid>/<gi>/<ci>``; None if it names none."""
    if ident.startswith("MIG-GPU-") and "/" in ident:
        parent_id, _, rest = ident[4:].partition("/")
        try:
            gi, ci = (int(x) for x in rest.split("/"))
        except ValueError:
            return None
        parent = _by_uuid(nv, parent_id, count)
        return None if parent is None else _mig_by_instance(nv, parent, gi, ci)
    try:
        return nv.nvmlDeviceGetHandleByUUID(ident)
    except nv.NVMLError:
        pass
    matches = [h for uuid, h in _all_uuids(nv, count, mig=ident.startswith("MIG-")) if uuid.startswith(ident)]
    return matches[0] if len(matches) == 1 else None


def _all_uuids(nv: Any, count: int, mig: bool) -> Iterator[tuple[str, Any]]:
    for i in range(count):
        try:
            h = nv.nvmlDeviceGetHandleByIndex(i)
        except nv.NVMLError:
            continue
        if not mig:
            try:
                yield _s(nv.nvmlDeviceGetUUID(h)), h
            except nv.NVMLError:
                pass
            continue
        for m in _migs(nv, h):
            try:
                yield _s(nv.nvmlDeviceGetUUID(m)), m
            except nv.NVMLError:
                pass


def _migs(nv: Any, parent: Any) -> Iterator[Any]:
    try:
        n = nv.nvmlDeviceGetMaxMigDeviceCount(parent)
    except (nv.NVMLError, AttributeError):
        return
    for j in range(n):
        try:
            yield nv.nvmlDeviceGetMigDeviceHandleByIndex(parent, j)
        except nv.NVMLError:  # an empty slot: NVML_ERROR_NOT_FOUND
            continue


def _mig_by_instance(nv: Any, parent: Any, gi: int, ci: int) -> Any:
    for m in _migs(nv, parent):
        try:
            if nv.nvmlDeviceGetGpuInstanceId(m) == gi and nv.nvmlDeviceGetComputeInstanceId(m) == ci:
                return m
        except nv.NVMLError:
            continue
    return None


def _reasons_function(nv: Any, handle: Any) -> Callable[[Any], int] | None:
    """``nvmlDeviceGetCurrentClocksEventReasons`` (driver ≥ 535), else the older
    ``...ThrottleReasons``; chosen once."""
    fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
    if fn is not None:
        try:
            fn(handle)
            return fn
        except nv.NVMLError as err:
            if getattr(err, "value", None) not in (_FUNCTION_NOT_FOUND, _NOT_SUPPORTED):
                return fn
        except Exception:
            pass
    return getattr(nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None) or fn


def _probes(nv: Any, reasons: Any) -> list[tuple[str, Callable]]:
    """The metric table: (name, fn(handle, prefix, out)); each fn adds its keys. ``reasons``:
    :func:`_reasons_function`'s function, or None (no throttle probe)."""
    get_util = nv.nvmlDeviceGetUtilizationRates
    get_mem = nv.nvmlDeviceGetMemoryInfo
    get_temp = nv.nvmlDeviceGetTemperature
    get_power = nv.nvmlDeviceGetPowerUsage
    get_limit = nv.nvmlDeviceGetEnforcedPowerLimit
    get_clock = nv.nvmlDeviceGetClockInfo

    def utilization(h: Any, p: str, out: dict[str, float]) -> None:
        out[p + "utilization_percent"] = float(get_util(h).gpu)

    def memory(h: Any, p: str, out: dict[str, float]) -> None:
        m = get_mem(h)
        used, total = float(m.used), float(m.total)
        out[p + "memory_used_bytes"] = used
        out[p + "memory_total_bytes"] = total
        if total > 0:
            out[p + "memory_percent"] = used / total * 100.0

    def temperature(h: Any, p: str, out: dict[str, float]) -> None:
        out[p + "temperature_c"] = float(get_temp(h, _TEMPERATURE_GPU))

    def power(h: Any, p: str, out: dict[str, float]) -> None:
        out[p + "power_w"] = get_power(h) / 1000.0  # NVML: milliwatts

    def power_limit(h: Any, p: str, out: dict[str, float]) -> None:
        out[p + "power_limit_w"] = get_limit(h) / 1000.0

    def sm_clock(h: Any, p: str, out: dict[str, float]) -> None:
        out[p + "sm_clock_mhz"] = float(get_clock(h, _CLOCK_SM))

    def memory_clock(h: Any, p: str, out: dict[str, float]) -> None:
        out[p + "memory_clock_mhz"] = float(get_clock(h, _CLOCK_MEM))

    def throttle(h: Any, p: str, out: dict[str, float]) -> None:
        bits = int(reasons(h))
        out[p + "throttle_reasons"] = float(bits)
        out[p + "throttle_thermal"] = 1.0 if bits & (_SW_THERMAL | _HW_THERMAL) else 0.0
        out[p + "throttle_power_cap"] = 1.0 if bits & (_SW_POWER_CAP | _HW_POWER_BRAKE) else 0.0
        out[p + "throttle_hw_slowdown"] = 1.0 if bits & _HW_SLOWDOWN else 0.0

    table = [
        ("utilization", utilization),
        ("memory", memory),
        ("temperature", temperature),
        ("power", power),
        ("power_limit", power_limit),
        ("sm_clock", sm_clock),
        ("memory_clock", memory_clock),
    ]
    if reasons is not None:
        table.append(("throttle_reasons", throttle))
    return table
