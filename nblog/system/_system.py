"""System metrics sampled by local rank 0 of each machine (README, "System metrics";
every field: docs/system-metrics.md).

:func:`start_sampler` (called by ``init`` on the process whose local rank is 0) starts
one daemon thread, ``nblog-system``. It records the machine once (a STATS frame with
``machine={hostname, cpu_count, memory_total_bytes, gpus, driver_version, ...}``), then
samples on a deadline schedule: the first sample ``min(1, interval)`` seconds after
start, then every ``interval`` seconds (a sample that runs late never causes a burst:
missed deadlines are skipped). Each sample goes into this rank's own event log as
points of kind SYSTEM, at the last step this process saw, with the time of the sample.
``Run.finish`` stops and joins the thread (at most 1 s) and NVML is shut down.

Keys (units in the name; ``i`` follows ``CUDA_VISIBLE_DEVICES``, see ``_nvml``):

=========  ==================================================================
group      keys
=========  ==================================================================
cpu        ``system/cpu_percent`` (all cores, since the previous sample)
memory     ``system/memory_used_bytes``, ``system/memory_available_bytes``,
           ``system/memory_percent``, ``system/process_rss_bytes`` (this process)
disk       ``system/disk_read_bytes_per_s``, ``system/disk_write_bytes_per_s``
network    ``system/net_recv_bytes_per_s``, ``system/net_sent_bytes_per_s``
           (every interface but loopback)
gpu        ``system/gpu{i}/<metric>`` for each metric of ``_nvml.METRICS``
=========  ==================================================================

Rates come from the difference between two samples, so the first sample has none.
psutil and pynvml are imported in the sampler thread, never by ``import nblog``.
The thread never raises: a failing psutil call or NVML query warns once per kind
(logger ``nblog``) and the sampler goes on; without NVML (no driver, no GPU) the GPU
group is absent, with one info line and a ``gpu_note`` in the machine record.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping

from .. import _log as log
from ..format._host import hostname
from ._nvml import Gpus

TYPE_CHECKING = False  # typing is not imported before a sampler starts
if TYPE_CHECKING:
    from typing import Any

    from ..write._run import Run

PSUTIL_GROUPS = ("cpu", "memory", "disk", "network")
_JOIN_S = 1.0  # how long finish waits for the thread (SIGTERM must flush within 1 s)


def start_sampler(run: Run, groups: Iterable[str] | None, interval: float, env: Mapping[str, str]) -> SamplerThread | None:
    """Start sampling ``groups`` every ``interval`` seconds into ``run``'s event log.

    Creates this rank's event log now, in the caller's thread (so the sampler never
    races the caller to create it), starts the ``nblog-system`` daemon thread and
    registers its stop in ``run._on_finish``. Returns None (and starts nothing) when
    there are no groups or this rank cannot write.
    """
    groups = tuple(groups or ())
    if not groups or run.dir is None or not run._ensure_writer():
        return None
    thread = SamplerThread(run, Sampler(groups, env), interval)
    run._on_finish.append(thread.stop)
    thread.start()
    return thread


class Sampler:
    """Reads the machine's metrics: ``open()``, then ``sample()`` repeatedly, ``close()``.

    Args:
        groups: among "cpu", "memory", "disk", "network", "gpu"; only these are read.
        env: the environment (``CUDA_VISIBLE_DEVICES``, ``NB_HOSTNAME``).
        clock: a monotonic clock in seconds, for the rates.

    Not thread-safe: used by one thread. Never raises from ``open``, ``sample`` or
    ``close``; failures are warned once per kind.
    """

    def __init__(self, groups: Iterable[str], env: Mapping[str, str], *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.groups = tuple(groups)
        self._env = env
        self._clock = clock
        self._warned: set = set()
        self._psutil: Any = None  # the psutil module, once open() imported it
        self._process: Any = None  # psutil.Process() of this process
        self._prev: dict[str, tuple[float, tuple[int, ...]]] = {}
        self._readers: list[tuple[str, Callable[[dict], None]]] = []
        self.gpus: Gpus | None = None
        self.gpu_note: str | None = None  # why there are no GPU metrics, if there are none

    def open(self) -> None:
        """Import psutil / pynvml as the groups need, prime CPU percent, start NVML."""
        if any(g in PSUTIL_GROUPS for g in self.groups):
            try:
                import psutil

                self._psutil = psutil
                self._process = psutil.Process()
                if "cpu" in self.groups:
                    psutil.cpu_percent(interval=None)  # prime: the next call measures since now
            except Exception as err:
                self._psutil = None
                self._warn(("psutil",), f"nblog: psutil is not usable ({err!r}); CPU, memory, "
                           "disk and network metrics are not recorded")
        if self._psutil is not None:
            for name, reader in (("cpu", self._cpu), ("memory", self._memory),
                                 ("disk", self._disk), ("network", self._network)):
                if name in self.groups:
                    self._readers.append((name, reader))
        if "gpu" in self.groups:
            gpus = Gpus(self._warn)
            try:
                ok = gpus.open(self._env)
            except Exception as err:  # Gpus.open handles its own errors; belt and braces
                ok, gpus.note = False, f"NVML failed: {err!r}"
            if ok:
                self.gpus = gpus
            else:
                self.gpu_note = gpus.note
                log.info("nblog: no GPU metrics on this machine: %s", gpus.note)

    def close(self) -> None:
        """Shut NVML down."""
        if self.gpus is not None:
            self.gpus.close()
            self.gpus = None

    def machine(self) -> dict:
        """The machine record: hostname, CPUs, memory, GPUs and driver, for the STATS frame."""
        import platform

        info: dict = {
            "hostname": hostname(self._env),
            "os": f"{platform.system()} {platform.release()}",
            "cpu_count": os.cpu_count(),
            "cpu_count_physical": None,
            "memory_total_bytes": None,
            "gpus": [],
            "driver_version": None,
            "cuda_driver_version": None,
            "cuda_visible_devices": self._env.get("CUDA_VISIBLE_DEVICES"),
            "system_groups": list(self.groups),
            "gpu_note": self.gpu_note if "gpu" in self.groups else "gpu group off",
        }
        ps = self._psutil
        if ps is not None:
            try:
                info["cpu_count"] = ps.cpu_count(logical=True) or info["cpu_count"]
                info["cpu_count_physical"] = ps.cpu_count(logical=False)
                info["memory_total_bytes"] = int(ps.virtual_memory().total)
            except Exception as err:
                self._warn(("machine",), f"nblog: cannot describe this machine: {err!r}")
        if self.gpus is not None:
            info["gpus"] = self.gpus.machine()
            info["driver_version"] = self.gpus.driver_version
            info["cuda_driver_version"] = self.gpus.cuda_driver_version
        return info

    def sample(self) -> dict[str, float]:
        """One sample of every open group: ``{tag: value}``."""
        out: dict[str, float] = {}
        for name, reader in self._readers:
            try:
                reader(out)
            except Exception as err:
                self._warn((name,), f"nblog: reading {name} metrics failed ({err!r}); "
                           "skipped, the sampler goes on")
        if self.gpus is not None:
            try:
                self.gpus.sample(out)
            except Exception as err:
                self._warn(("gpu",), f"nblog: reading GPU metrics failed ({err!r}); "
                           "skipped, the sampler goes on")
        return out

    # -- groups ------------------------------------------------------------------------

    def _cpu(self, out: dict) -> None:
        out["system/cpu_percent"] = float(self._psutil.cpu_percent(interval=None))

    def _memory(self, out: dict) -> None:
        vm = self._psutil.virtual_memory()
        out["system/memory_used_bytes"] = float(vm.used)
        out["system/memory_available_bytes"] = float(vm.available)
        out["system/memory_percent"] = float(vm.percent)
        out["system/process_rss_bytes"] = float(self._process.memory_info().rss)

    def _disk(self, out: dict) -> None:
        c = self._psutil.disk_io_counters()
        if c is None:  # no disk statistics here (some containers)
            self._warn(("disk-none",), "nblog: this machine exposes no disk I/O counters; "
                       "disk metrics are not recorded")
            return
        self._rates(out, "disk", (c.read_bytes, c.write_bytes),
                    ("system/disk_read_bytes_per_s", "system/disk_write_bytes_per_s"))

    def _network(self, out: dict) -> None:
        recv = sent = 0
        for nic, c in self._psutil.net_io_counters(pernic=True).items():
            if not nic.startswith("lo"):
                recv += c.bytes_recv
                sent += c.bytes_sent
        self._rates(out, "network", (recv, sent),
                    ("system/net_recv_bytes_per_s", "system/net_sent_bytes_per_s"))

    def _rates(self, out: dict, what: str, counts: tuple[int, ...], keys: tuple[str, ...]) -> None:
        now = self._clock()
        prev = self._prev.get(what)
        self._prev[what] = (now, counts)
        if prev is None:
            return
        dt = now - prev[0]
        if dt <= 0:
            return
        for key, new, old in zip(keys, counts, prev[1], strict=True):
            if new >= old:  # a counter that went back (a NIC went away) gives no rate
                out[key] = (new - old) / dt

    def _warn(self, key: tuple, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message)


class SamplerThread:
    """Runs a :class:`Sampler` in the ``nblog-system`` daemon thread, logging into a run."""

    def __init__(self, run: Run, sampler: Sampler, interval: float) -> None:
        self._run = run
        self.sampler = sampler
        self.interval = float(interval)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name="nblog-system", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = _JOIN_S) -> None:
        """Stop sampling and wait at most ``timeout`` s for the thread (idempotent)."""
        self._stop.set()
        t = self._thread
        if t.is_alive() and t is not threading.current_thread():
            t.join(timeout)
            if t.is_alive():
                log.warning("nblog: the system sampler did not stop within %.1f s "
                            "(a slow NVML call?); leaving it behind", timeout)

    def _main(self) -> None:
        sampler, stop = self.sampler, self._stop
        try:
            sampler.open()
            if not stop.is_set():
                self._record_machine()
            self._loop()
        except Exception as err:  # never let the thread die with a traceback
            sampler._warn(("thread",), f"nblog: the system sampler stopped: {err!r}")
        finally:
            sampler.close()

    def _record_machine(self) -> None:
        run = self._run
        try:
            if run._ensure_writer() and run._writer is not None:
                run._writer.stats(machine=self.sampler.machine())
        except Exception as err:
            self.sampler._warn(("machine-write",), f"nblog: cannot record this machine: {err!r}")

    def _loop(self) -> None:
        clock, stop, interval = time.monotonic, self._stop, self.interval
        deadline = clock() + min(1.0, interval)
        while not stop.wait(max(0.0, deadline - clock())):
            values = self.sampler.sample()
            if values:
                try:
                    self._run._log_system(values)
                except Exception as err:
                    self.sampler._warn(("log",), f"nblog: cannot log system metrics: {err!r}")
            deadline += interval
            now = clock()
            if deadline <= now:  # fell behind (a slow sample, a suspended process): skip
                deadline = now + interval
