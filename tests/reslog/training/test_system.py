"""reslog.training.system: the telemetry sampler.

NVML cannot run on this machine (no GPU, no driver), so GPU readings are tested against
`FakeNvml`, a stand-in with pynvml's function names that raises pynvml's own NVMLError
subclasses for unsupported fields and failed init. The real pynvml is still exercised for
the no-driver path, and scripts/check_nvml.py checks the real path on a GPU host.
psutil readings are real.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections import Counter
from types import SimpleNamespace

import psutil
import pynvml
import pytest

from reslog.training.system import SystemSampler, _Rate, visible_devices
from schema.rules.alerts import GPU_SERIES

GIB = 1 << 30
HOST_KEYS = {"sys/ram_used_gib", "sys/ram_pct", "sys/proc_rss_gib"}
RATE_KEYS = {
    "sys/cpu_pct",
    "sys/disk_read_mbps",
    "sys/disk_write_mbps",
    "sys/net_recv_mbps",
    "sys/net_sent_mbps",
}


def nvml_error(code: int) -> pynvml.NVMLError:
    return pynvml.NVMLError(code)  # pynvml maps the code to its subclass


class FakeNvml:
    """pynvml's interface over a list of GPUs (dicts). `broken`: {gpu index: {fn name: code}}."""

    NVMLError = pynvml.NVMLError
    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU
    NVML_CLOCK_SM = pynvml.NVML_CLOCK_SM
    nvmlMemory_v2 = pynvml.nvmlMemory_v2

    def __init__(self, gpus, broken=None, init_error=None, old_binding=False):
        self.gpus = gpus
        self.broken = broken or {}
        self.init_error = init_error
        self.calls: Counter[tuple[str, int]] = Counter()
        self.initialised = 0
        if not old_binding:
            self.nvmlDeviceGetCurrentClocksEventReasons = self._throttle
        else:
            self.nvmlDeviceGetCurrentClocksThrottleReasons = self._throttle

    def nvmlInit(self):
        if self.init_error is not None:
            raise nvml_error(self.init_error)
        self.initialised += 1

    def nvmlShutdown(self):
        self.initialised -= 1

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):
        if not 0 <= i < len(self.gpus):
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return SimpleNamespace(index=i)

    def nvmlDeviceGetHandleByUUID(self, uuid):
        for i, gpu in enumerate(self.gpus):
            if gpu["uuid"] == uuid:
                return SimpleNamespace(index=i)
        raise nvml_error(pynvml.NVML_ERROR_NOT_FOUND)

    def nvmlDeviceGetUUID(self, h):
        return self.gpus[h.index]["uuid"].encode()  # older bindings return bytes

    def _read(self, name, h):
        self.calls[(name, h.index)] += 1
        code = self.broken.get(h.index, {}).get(name)
        if code is not None:
            raise nvml_error(code)
        return self.gpus[h.index]

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=self._read("util", h)["util"], memory=0)

    def nvmlDeviceGetMemoryInfo(self, h, version=None):
        # A real driver: v1's "used" includes the driver's reserved memory, v2 counts it apart
        # (nvidia-smi shows v2's); an old driver has no v2 ("no_v2").
        g = self._read("mem", h)
        reserved = g.get("reserved", 0)
        if version is None:
            used = g["used"] + reserved
            return SimpleNamespace(used=used, total=g["total"], free=g["total"] - used)
        if g.get("no_v2"):
            raise nvml_error(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        assert version == pynvml.nvmlMemory_v2
        return SimpleNamespace(
            used=g["used"], reserved=reserved, total=g["total"], free=g["total"] - g["used"]
        )

    def nvmlDeviceGetTemperature(self, h, sensor):
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return self._read("temp", h)["temp"]

    def nvmlDeviceGetPowerUsage(self, h):
        return self._read("power", h)["power_mw"]

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return self._read("power_limit", h)["limit_mw"]

    def nvmlDeviceGetFanSpeed(self, h):
        return self._read("fan", h)["fan"]

    def nvmlDeviceGetClockInfo(self, h, clock):
        assert clock == pynvml.NVML_CLOCK_SM
        return self._read("sm_clock", h)["sm"]

    def _throttle(self, h):
        return self._read("throttle", h)["throttle"]


def gpu(i: int, uuid: str | None = None) -> dict:
    return {
        "uuid": uuid or f"GPU-{i}a{i}b{i}c{i}-0000-1111-2222-33334444555{i}",
        "util": 90 + i,
        "used": (10 + i) * GIB,
        "total": 80 * GIB,
        "temp": 60 + i,
        "power_mw": 300_000 + 1000 * i,
        "limit_mw": 700_000,
        "fan": 40 + i,
        "sm": 1980 - i,
        "throttle": 0x4 if i == 0 else 0x1,
    }


def collect(sampler: SystemSampler, samples: list, n: int) -> None:
    """Run the sampler until it has emitted n samples (or 20 s passed), then stop it."""
    done = threading.Event()
    emit = sampler.emit

    def counting(metrics, wall):
        try:
            emit(metrics, wall)
        finally:
            if len(samples) >= n:
                done.set()

    sampler.emit = counting
    sampler.start()
    done.wait(20)
    assert sampler.stop(5)
    assert len(samples) >= n, f"only {len(samples)} samples arrived"


def run_fake(nvml, n=2):
    samples: list[tuple[dict, float]] = []
    sampler = SystemSampler(lambda m, w: samples.append((m, w)), 0.02, nvml=nvml)
    collect(sampler, samples, n)
    return sampler, samples


@pytest.fixture(autouse=True)
def all_gpus_visible(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_every_gpu_field_is_read_and_converted_to_the_documented_units():
    nvml = FakeNvml([gpu(0), gpu(1)])
    _, samples = run_fake(nvml)
    metrics, wall = samples[0]
    assert metrics["sys/gpu0/util"] == 90.0
    assert metrics["sys/gpu1/util"] == 91.0
    assert metrics["sys/gpu1/mem_used_gib"] == pytest.approx(11.0)
    assert metrics["sys/gpu1/mem_total_gib"] == pytest.approx(80.0)
    assert metrics["sys/gpu0/temp_c"] == 60.0
    assert metrics["sys/gpu1/power_w"] == pytest.approx(301.0)  # mW → W
    assert metrics["sys/gpu0/power_limit_w"] == pytest.approx(700.0)
    assert metrics["sys/gpu1/fan_pct"] == 41.0
    assert metrics["sys/gpu1/sm_clock_mhz"] == 1979.0
    assert metrics["sys/gpu0/throttle"] == 4.0  # SW power cap bit
    assert all(isinstance(v, float) for v in metrics.values())
    assert abs(wall - time.time()) < 60
    assert nvml.initialised == 0, "nvmlShutdown must balance nvmlInit when the sampler stops"


def test_the_sampler_writes_every_gpu_series_schema_names_and_no_other():
    """schema.rules.alerts.GPU_SERIES is the list the viewer finds reslog's GPU series by: a
    name there that the sampler never writes, or one it writes that is not there, is a chart
    the System page cannot fill."""
    _, samples = run_fake(FakeNvml([gpu(0)]))
    written = sorted(key.removeprefix("sys/gpu0/") for key in samples[0][0] if "gpu0/" in key)
    assert written == sorted(GPU_SERIES)


def test_older_binding_with_throttle_reasons_name_still_reports_throttle():
    _, samples = run_fake(FakeNvml([gpu(0)], old_binding=True))
    assert samples[0][0]["sys/gpu0/throttle"] == 4.0


def test_unsupported_fields_are_skipped_and_never_asked_again():
    broken = {
        0: {"fan": pynvml.NVML_ERROR_NOT_SUPPORTED},  # passive-cooled SXM board
        1: {"power": pynvml.NVML_ERROR_NO_PERMISSION, "throttle": pynvml.NVML_ERROR_UNKNOWN},
    }
    nvml = FakeNvml([gpu(0), gpu(1)], broken=broken)
    _, samples = run_fake(nvml, n=4)
    for metrics, _ in samples:
        assert "sys/gpu0/fan_pct" not in metrics
        assert "sys/gpu1/power_w" not in metrics
        assert "sys/gpu1/throttle" not in metrics
        assert metrics["sys/gpu1/fan_pct"] == 41.0  # the same field on another GPU still works
        assert metrics["sys/gpu0/power_w"] == pytest.approx(300.0)
    assert nvml.calls[("fan", 0)] == 1
    assert nvml.calls[("power", 1)] == 1
    assert nvml.calls[("throttle", 1)] == 1
    assert nvml.calls[("fan", 1)] >= 4


@pytest.mark.parametrize(
    "code", [pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, pynvml.NVML_ERROR_DRIVER_NOT_LOADED]
)
def test_nvml_init_failure_gives_host_metrics_only_and_one_debug_line(caplog, code):
    caplog.set_level(logging.DEBUG, logger="reslog.system")
    _, samples = run_fake(FakeNvml([gpu(0)], init_error=code), n=2)
    for metrics, _ in samples:
        assert not [k for k in metrics if k.startswith("sys/gpu")]
        assert metrics.keys() >= HOST_KEYS
    lines = [r for r in caplog.records if "NVML unavailable" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.DEBUG


def test_real_pynvml_on_this_host_never_crashes_the_sampler():
    # The real library: on this GPU-less machine nvmlInit raises NVMLError_LibraryNotFound.
    try:
        pynvml.nvmlInit()
        expect_gpu = pynvml.nvmlDeviceGetCount() > 0
        pynvml.nvmlShutdown()
    except pynvml.NVMLError:
        expect_gpu = False
    samples: list = []
    sampler = SystemSampler(lambda m, w: samples.append((m, w)), 0.02)
    collect(sampler, samples, 2)
    metrics = samples[-1][0]
    assert metrics.keys() >= HOST_KEYS
    assert ("sys/gpu0/mem_total_gib" in metrics) == expect_gpu


def nvml4():
    return FakeNvml([gpu(i) for i in range(4)])


@pytest.mark.parametrize(
    ("spec", "nvml_indices"),
    [
        ("2,0", [2, 0]),
        ("3", [3]),
        (" 1 , 2 ", [1, 2]),
        ("0,7,1", [0]),  # CUDA stops at the first entry naming no device
        ("-1,0", []),
        ("", []),
        ("1,1", [1]),
        ("GPU-2a2b2c2", [2]),  # a unique UUID prefix
        ("GPU-3a3b3c3-0000-1111-2222-333344445553,0", [3, 0]),
        ("GPU-,1", []),  # ambiguous prefix: no device, parsing stops
        ("GPU-ffff,1", []),
        ("1,GPU-0a0b", [1, 0]),
    ],
)
def test_cuda_visible_devices_maps_cuda_ordinals_to_nvml_devices(spec, nvml_indices):
    devices = visible_devices(nvml4(), {"CUDA_VISIBLE_DEVICES": spec})
    assert [d.nvml_index for d in devices] == nvml_indices
    assert [d.ordinal for d in devices] == list(range(len(nvml_indices)))


def test_unset_cuda_visible_devices_sees_every_gpu_in_nvml_order():
    assert [d.nvml_index for d in visible_devices(nvml4(), {})] == [0, 1, 2, 3]


def test_mig_entry_keeps_its_ordinal():
    nvml = FakeNvml([gpu(0), gpu(1, uuid="MIG-abc")])
    devices = visible_devices(nvml, {"CUDA_VISIBLE_DEVICES": "MIG-abc,MIG-missing"})
    assert [d.ordinal for d in devices] == [0, 1]
    assert devices[0].handle.index == 1
    assert devices[1].handle is None


def test_sampler_names_metrics_by_cuda_ordinal(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    _, samples = run_fake(nvml4())
    metrics = samples[0][0]
    assert metrics["sys/gpu0/temp_c"] == 63.0  # NVML device 3 is what CUDA calls device 0
    assert metrics["sys/gpu1/temp_c"] == 61.0
    assert not [k for k in metrics if k.startswith(("sys/gpu2/", "sys/gpu3/"))]


def test_host_metrics_are_real_numbers():
    sampler = SystemSampler(lambda m, w: None)
    first = sampler.sample()
    assert first.keys() >= HOST_KEYS
    assert not RATE_KEYS & first.keys(), "the first sample has nothing to take a rate against"
    with open(os.devnull, "wb") as sink:
        sink.write(b"x" * 1000)
    # CPU time between the two samples: the kernel counts it in clock ticks (10 ms), so a fixed
    # amount of work can fall inside one tick on a busy machine and leave no rate to report.
    # Work until the counters have moved (a few ticks at most; bounded so it cannot hang).
    ticks = sum(psutil.cpu_times())
    deadline = time.monotonic() + 10
    while sum(psutil.cpu_times()) <= ticks and time.monotonic() < deadline:
        sum(i * i for i in range(20_000))
    second = sampler.sample()
    expected_rates = {"sys/cpu_pct", "sys/net_recv_mbps", "sys/net_sent_mbps"}
    if psutil.disk_io_counters() is not None:
        expected_rates |= {"sys/disk_read_mbps", "sys/disk_write_mbps"}
    assert expected_rates <= second.keys()
    for key, value in second.items():
        assert isinstance(value, float) and math.isfinite(value), key
    assert 0 <= second["sys/cpu_pct"] <= 100
    assert all(second[k] >= 0 for k in expected_rates)
    vm = psutil.virtual_memory()
    assert 0 < second["sys/ram_used_gib"] <= vm.total / GIB
    assert 0 < second["sys/ram_pct"] <= 100
    rss = psutil.Process().memory_info().rss / GIB
    assert second["sys/proc_rss_gib"] == pytest.approx(rss, rel=0.5)


def test_rate_is_megabytes_per_second_between_readings():
    rate = _Rate()
    assert rate(10.0, 5_000_000) is None
    assert rate(12.0, 9_000_000) == pytest.approx(2.0)
    assert rate(13.0, 1_000) is None, "a counter that went backwards (reset) gives no rate"
    assert rate(14.0, 3_001_000) == pytest.approx(3.0)
    assert rate(14.0, 4_000_000) is None, "no time passed: no rate"


def test_stop_returns_within_the_timeout_while_the_thread_waits_a_long_interval():
    samples: list = []
    first = threading.Event()

    def emit(metrics, wall):
        samples.append(metrics)
        first.set()

    sampler = SystemSampler(emit, interval=3600, nvml=FakeNvml([]))
    sampler.start()
    assert first.wait(10), "the first sample is taken at once on start"
    assert sampler.stop(timeout=5.0), "stop() must wake the waiting thread"
    assert len(samples) == 1


def test_stop_gives_up_after_the_timeout_when_emit_hangs():
    release = threading.Event()
    entered = threading.Event()

    def hanging_emit(metrics, wall):
        entered.set()
        release.wait(30)

    sampler = SystemSampler(hanging_emit, interval=0.01, nvml=FakeNvml([]))
    sampler.start()
    assert entered.wait(10)
    assert sampler.stop(timeout=0.05) is False  # returns instead of hanging the caller
    release.set()
    assert sampler.stop(timeout=5.0)


def test_emit_errors_are_logged_once_and_sampling_goes_on(caplog):
    calls = []

    def failing_emit(metrics, wall):
        calls.append(metrics)
        raise OSError("disk full")

    sampler = SystemSampler(failing_emit, interval=0.01, nvml=FakeNvml([gpu(0)]))
    collect(sampler, calls, 3)
    warnings = [r for r in caplog.records if "could not be recorded" in r.getMessage()]
    assert len(warnings) == 1


def test_bad_interval_and_double_start_are_refused():
    with pytest.raises(ValueError, match="interval must be > 0"):
        SystemSampler(lambda m, w: None, interval=0)
    sampler = SystemSampler(lambda m, w: None, interval=3600, nvml=FakeNvml([]))
    sampler.start()
    with pytest.raises(RuntimeError, match="already started"):
        sampler.start()
    assert sampler.stop(5)


def test_a_run_stores_system_samples_at_its_current_step(store_path):
    import reslog
    from schema.store import read
    from schema.store.connect import open_store

    run = reslog.init(
        project="p", name="sys", store=str(store_path), system_interval=0.05, flush_interval=0.05
    )
    run.log({"train/loss": 1.0}, step=7)
    engine = open_store(str(store_path), readonly=True)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:  # until a second sample (the first with rates) is stored
        with engine.connect() as conn:
            if "sys/cpu_pct" in read.key_names(conn).values():
                break
        time.sleep(0.05)
    assert run.finish()
    with engine.connect() as conn:
        run_id = read.list_runs(conn)[0][0]
        names = read.key_names(conn)
        rows = read.fetch_points(conn, [run_id])
    engine.dispose()
    stored = {names[k] for k in rows.key_ids}
    assert stored >= HOST_KEYS | {"sys/cpu_pct", "train/loss"}
    sys_steps = {s for s, k in zip(rows.steps, rows.key_ids, strict=True) if "sys/" in names[k]}
    assert sys_steps <= {0, 7}, "samples carry the run's current step"


def test_gpu_memory_used_leaves_the_drivers_reserved_memory_out_as_nvidia_smi_does():
    # Seen on an H200 (driver 580): NVML's v1 call said 0.60 GiB used on an idle card where
    # nvidia-smi said 0.004; v2 counts the reserved memory apart. Fake NVML: no GPU here.
    from reslog.training.system import _read_mem

    card = {**gpu(0), "used": 4 * 2**20, "reserved": int(0.6 * GIB)}
    nvml = FakeNvml([card])
    used, total = _read_mem(nvml, nvml.nvmlDeviceGetHandleByIndex(0))
    assert used == 4 * 2**20 / GIB and total == 80
    old_driver = FakeNvml([{**card, "no_v2": True}])
    used, _ = _read_mem(old_driver, old_driver.nvmlDeviceGetHandleByIndex(0))
    assert used == (4 * 2**20 + int(0.6 * GIB)) / GIB  # v1: all it has
