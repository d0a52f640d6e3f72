"""System telemetry: GPU readings from NVML in-process and host readings from psutil.

A `SystemSampler` runs one daemon thread that waits on an Event between samples (it never
spins) and hands each sample to `emit(metrics, wall_time)`; the run appends it at its current
step. Missing NVML, a GPU without some sensor, or a failing reading costs that reading only:
the sampler never raises into training. Key names and units: docs/system-metrics.md.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psutil

from schema.rules.alerts import GPU_SERIES

# The name docs/system-metrics.md gives for filtering these messages, whatever the module path.
log = logging.getLogger("reslog.system")

GIB = float(1 << 30)
MB = 1e6

Emit = Callable[[dict[str, float], float], None]

# Interfaces whose bytes are counted elsewhere too (loopback, traffic-shaping mirrors, container
# bridges and veth pairs carry traffic that also crosses the physical NIC, or never leaves).
_VIRTUAL_NIC_PREFIXES = ("lo", "ifb", "veth", "docker", "br-", "virbr", "cni", "flannel")


def _read_util(nvml, h) -> float:
    return float(nvml.nvmlDeviceGetUtilizationRates(h).gpu)


def _read_mem(nvml, h) -> tuple[float, float]:
    # The v2 call counts the driver's reserved memory apart, as nvidia-smi does; v1's "used"
    # includes it (0.6 GiB more on an idle H200, driver 580). v1 where a driver lacks v2.
    try:
        mem = nvml.nvmlDeviceGetMemoryInfo(h, version=nvml.nvmlMemory_v2)
    except (nvml.NVMLError, AttributeError, TypeError):
        mem = nvml.nvmlDeviceGetMemoryInfo(h)
    return mem.used / GIB, mem.total / GIB


def _read_temp(nvml, h) -> float:
    return float(nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU))


def _read_power(nvml, h) -> float:
    return nvml.nvmlDeviceGetPowerUsage(h) / 1000.0  # mW → W


def _read_power_limit(nvml, h) -> float:
    return nvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0  # mW → W


def _read_fan(nvml, h) -> float:
    return float(nvml.nvmlDeviceGetFanSpeed(h))


def _read_sm_clock(nvml, h) -> float:
    return float(nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM))


def _read_throttle(nvml, h) -> float:
    # Renamed "clocks event reasons" in newer drivers/bindings; the bitmask is the same.
    fn = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
    if fn is None:
        fn = nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    return float(fn(h))


def _names(*measures: str) -> tuple[str, ...]:
    """reslog's key suffixes for these measures: the names schema.rules.alerts.GPU_SERIES gives
    them (and the viewer finds them by)."""
    by_measure = {measure: name for name, (measure, _unit) in GPU_SERIES.items()}
    return tuple(by_measure[m] for m in measures)


# field name → (reader, metric suffixes it fills). Memory gives two values in one call.
GPU_FIELDS: dict[str, tuple[Callable[[Any, Any], Any], tuple[str, ...]]] = {
    "util": (_read_util, _names("util")),
    "mem": (_read_mem, _names("mem_used", "mem_total")),
    "temp": (_read_temp, _names("temp")),
    "power": (_read_power, _names("power")),
    "power_limit": (_read_power_limit, _names("power_limit")),
    "fan": (_read_fan, _names("fan")),
    "sm_clock": (_read_sm_clock, _names("sm_clock")),
    "throttle": (_read_throttle, _names("throttle")),
}


@dataclass
class GpuDevice:
    """One GPU the process can see: CUDA ordinal, its NVML handle, and what it cannot report."""

    ordinal: int
    nvml_index: int | None
    handle: Any
    unsupported: set[str] = field(default_factory=set)
    keys: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.keys = {
            name: tuple(f"sys/gpu{self.ordinal}/{s}" for s in suffixes)
            for name, (_, suffixes) in GPU_FIELDS.items()
        }


def _uuid(nvml, handle) -> str:
    uuid = nvml.nvmlDeviceGetUUID(handle)
    return uuid.decode() if isinstance(uuid, bytes) else str(uuid)


def visible_devices(nvml, environ: dict[str, str] | None = None) -> list[GpuDevice]:
    """NVML handles of the GPUs this process sees, indexed by CUDA ordinal.

    Follows CUDA's reading of CUDA_VISIBLE_DEVICES: unset → every GPU; a comma list of NVML
    indices or `GPU-<uuid>` (any unique prefix); parsing stops at the first entry that names no
    device (so "0,7,1" on a 4-GPU box sees only GPU 0); an empty value hides all GPUs. A MIG
    entry keeps its ordinal and is looked up by UUID where the driver allows.
    """
    env = os.environ if environ is None else environ
    count = nvml.nvmlDeviceGetCount()
    spec = env.get("CUDA_VISIBLE_DEVICES")
    if spec is None:
        return [GpuDevice(i, i, nvml.nvmlDeviceGetHandleByIndex(i)) for i in range(count)]
    uuids: list[str] | None = None
    devices: list[GpuDevice] = []
    for raw in spec.split(","):
        entry = raw.strip()
        if not entry:
            break
        if entry.startswith("MIG-"):
            try:
                handle = nvml.nvmlDeviceGetHandleByUUID(entry)
            except nvml.NVMLError:
                log.debug("CUDA_VISIBLE_DEVICES entry %s: no NVML handle", entry)
                handle = None
            devices.append(GpuDevice(len(devices), None, handle))
            continue
        index: int | None = None
        if entry.lstrip("+-").isdigit():
            value = int(entry)
            index = value if 0 <= value < count else None
        elif entry.startswith("GPU-"):
            if uuids is None:
                uuids = [_uuid(nvml, nvml.nvmlDeviceGetHandleByIndex(i)) for i in range(count)]
            matches = [i for i, u in enumerate(uuids) if u.startswith(entry)]
            index = matches[0] if len(matches) == 1 else None
        if index is None or any(d.nvml_index == index for d in devices):
            log.debug("CUDA_VISIBLE_DEVICES stops at entry %r (no such device)", entry)
            break
        devices.append(GpuDevice(len(devices), index, nvml.nvmlDeviceGetHandleByIndex(index)))
    return devices


class _Rate:
    """Bytes/s between two readings of a cumulative counter, in MB/s; None on the first one."""

    def __init__(self) -> None:
        self.last: tuple[float, float] | None = None

    def __call__(self, now: float, total: float) -> float | None:
        last, self.last = self.last, (now, total)
        if last is None or now <= last[0] or total < last[1]:  # first, clock step, counter reset
            return None
        return (total - last[1]) / (now - last[0]) / MB


class SystemSampler:
    """Samples NVML and psutil every `interval` seconds on a daemon thread.

    `emit(metrics, wall_time)` gets one dict per sample. The first sample is taken at once on
    start; rates (CPU %, disk and network MB/s) need two readings, so they begin with the second.
    `nvml` injects a module with pynvml's interface (tests); default: `pynvml`, imported lazily.
    """

    def __init__(self, emit: Emit, interval: float = 1.0, *, nvml: Any = None) -> None:
        if not interval > 0:
            raise ValueError(f"system sampling interval must be > 0 seconds, got {interval!r}")
        self.emit = emit
        self.interval = float(interval)
        self.devices: list[GpuDevice] = []
        self._nvml = nvml
        self._nvml_ready = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._proc = psutil.Process()
        self._cpu_last: tuple[float, float] | None = None
        self._disk_read, self._disk_write = _Rate(), _Rate()
        self._net_recv, self._net_sent = _Rate(), _Rate()
        self._warned: set[str] = set()

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("SystemSampler already started")
        self._thread = threading.Thread(target=self._loop, name="reslog-system", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> bool:
        """Ask the thread to end and wait at most `timeout` s; True when it has ended."""
        self._stop.set()
        thread = self._thread
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()

    def _loop(self) -> None:
        # NVML init can take seconds on a host without persistence mode: keep it off the caller.
        self._init_nvml()
        try:
            next_at = time.monotonic()
            while not self._stop.is_set():
                self._emit_once()
                next_at += self.interval
                now = time.monotonic()
                if next_at < now:  # fell behind (suspended, slow NVML): skip, never burst
                    next_at = now + self.interval
                if self._stop.wait(next_at - now):
                    break
        finally:
            self._shutdown_nvml()

    def _emit_once(self) -> None:
        try:
            metrics = self.sample()
            wall = time.time()
        except Exception as exc:  # never into training; the next sample tries again
            self._warn_once("sample", "system sample failed: %r", exc)
            return
        if not metrics:
            return
        try:
            self.emit(metrics, wall)
        except Exception as exc:
            self._warn_once("emit", "system metrics could not be recorded: %r", exc)

    def _warn_once(self, what: str, msg: str, *args: object) -> None:
        if what not in self._warned:
            self._warned.add(what)
            log.warning(msg, *args)

    # -- NVML --------------------------------------------------------------------------------------

    def _init_nvml(self) -> None:
        nvml = self._nvml
        try:
            if nvml is None:
                import pynvml as nvml  # nvidia-ml-py; optional (extra "gpu")
            nvml.nvmlInit()
        except Exception as exc:  # ImportError, NVMLError_LibraryNotFound, DriverNotLoaded...
            log.debug("no GPU metrics: NVML unavailable (%s)", exc)
            self._nvml = None
            return
        self._nvml, self._nvml_ready = nvml, True
        try:
            self.devices = visible_devices(nvml)
        except Exception as exc:
            log.debug("no GPU metrics: cannot list NVML devices (%s)", exc)
            self.devices = []

    def _shutdown_nvml(self) -> None:
        if self._nvml_ready:
            self._nvml_ready = False
            try:
                self._nvml.nvmlShutdown()
            except Exception as exc:
                log.debug("nvmlShutdown failed: %s", exc)

    def _sample_gpus(self, out: dict[str, float]) -> None:
        nvml = self._nvml
        for dev in self.devices:
            if dev.handle is None:
                continue
            for name, (reader, _) in GPU_FIELDS.items():
                if name in dev.unsupported:
                    continue
                try:
                    value = reader(nvml, dev.handle)
                except Exception as exc:
                    # NotSupported (no fan on passive SXM boards, no power on some MIG/vGPU),
                    # NoPermission, or a binding without the call: stop asking this device.
                    dev.unsupported.add(name)
                    log.debug("gpu%d: %s unavailable (%r); not read again", dev.ordinal, name, exc)
                    continue
                keys = dev.keys[name]
                if len(keys) == 1:
                    out[keys[0]] = value
                else:
                    for key, v in zip(keys, value, strict=True):
                        out[key] = v

    # -- host ------------------------------------------------------------------------------------

    def _cpu_pct(self) -> float | None:
        # Own bookkeeping rather than psutil.cpu_percent(), whose state is shared process-wide
        # and would be reset by anyone else in the process calling it.
        t = psutil.cpu_times()
        idle = t.idle + getattr(t, "iowait", 0.0)
        total = sum(t) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)
        last, self._cpu_last = self._cpu_last, (total, idle)
        if last is None or total <= last[0]:
            return None
        busy = (total - last[0]) - (idle - last[1])
        return max(0.0, min(100.0, 100.0 * busy / (total - last[0])))

    def _sample_host(self, out: dict[str, float], now: float) -> None:
        vm = psutil.virtual_memory()
        out["sys/ram_used_gib"] = (vm.total - vm.available) / GIB
        out["sys/ram_pct"] = float(vm.percent)
        with contextlib.suppress(psutil.Error):  # /proc unreadable (hardened containers)
            out["sys/proc_rss_gib"] = self._proc.memory_info().rss / GIB
        rates: dict[str, float | None] = {"sys/cpu_pct": self._cpu_pct()}
        disk = psutil.disk_io_counters()
        if disk is not None:  # None in some containers without /proc/diskstats
            rates["sys/disk_read_mbps"] = self._disk_read(now, disk.read_bytes)
            rates["sys/disk_write_mbps"] = self._disk_write(now, disk.write_bytes)
        nics = psutil.net_io_counters(pernic=True)
        real = [c for n, c in nics.items() if not n.startswith(_VIRTUAL_NIC_PREFIXES)]
        rates["sys/net_recv_mbps"] = self._net_recv(now, sum(c.bytes_recv for c in real))
        rates["sys/net_sent_mbps"] = self._net_sent(now, sum(c.bytes_sent for c in real))
        out.update({k: v for k, v in rates.items() if v is not None})

    def sample(self) -> dict[str, float]:
        """One reading of every available metric (NVML must be initialised for GPU keys)."""
        out: dict[str, float] = {}
        if self._nvml_ready:
            self._sample_gpus(out)
        self._sample_host(out, time.monotonic())
        return out
