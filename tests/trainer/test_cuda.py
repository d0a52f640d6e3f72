"""On a CUDA GPU only (marker ``cuda``; skipped, with the reason, everywhere else): the fused
kernels against the naive reference in bf16, CUDA scalars logged with no sync and stored
exactly, CUDA-event step timing, and NVML on a real card. scripts/gpu_check.sh runs these on a
GPU host (docs/gpu.md); the same cases also write the numbers of its report."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts" / "gpu"))

import kernel_parity  # noqa: E402
import nosync  # noqa: E402

pytestmark = pytest.mark.cuda


@pytest.mark.parametrize("case", list(kernel_parity.NAMES))
def test_kernel_agrees_with_the_naive_reference_in_bf16(case):
    why = kernel_parity.missing(case)
    if why:
        # An optional kernel package absent on this GPU host (flash-attn has no wheel on PyPI).
        pytest.skip(f"{case}: {why}")
    rows = kernel_parity.cases()[case]()
    bad = [f"{r.output}: {r.err:.2e} > {r.bar:.2e}" for r in rows if not r.ok]
    assert rows and not bad, bad


def test_cuda_scalars_are_logged_without_a_sync_and_stored_exactly(tmp_path):
    import reslog

    store = tmp_path / "runs.db"
    run = reslog.init(project="p", name="n", store=str(store), system=False, flush_interval=0.1)
    names, kept, error = nosync.log_scalars(run, steps=300, keys=4, device="cuda", strict=True)
    run.finish()
    assert error is None
    checked, equal, diffs = nosync.compare(nosync.gpucheck.read_points(store, "n"), names, kept)
    assert checked == equal == 1200, diffs


def test_cuda_event_phases_add_up_to_the_wall_time_of_a_gpu_bound_step():
    from trainer.metrics import StepTimer

    timer = StepTimer(torch.device("cuda"))
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    work = {"data": 1, "forward": 4, "backward": 8, "optimizer": 2}  # matmuls per phase
    phases = tuple(work)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for step in range(1, 21):
        timer.start(step)
        for phase in phases:
            for _ in range(work[phase]):
                a = (a @ a).clamp_(-1, 1)
            timer.mark(phase)
        timer.end()
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    done = timer.drain()
    assert [s for s, _ in done] == list(range(1, 21))
    summed = sum(sum(t[p] for p in phases) for _, t in done)
    assert abs(summed - wall) <= 0.05 * wall, (summed, wall)
    # The phases keep their proportions (8 matmuls take about twice as long as 4).
    total = {p: sum(t[p] for _, t in done) for p in phases}
    assert 1.5 < total["backward"] / total["forward"] < 2.5


def test_the_nvml_sampler_reads_this_gpu():
    from reslog.training.system import SystemSampler

    sampler = SystemSampler(lambda m, w: None)
    sampler._init_nvml()
    try:
        metrics = sampler.sample()
    finally:
        sampler._shutdown_nvml()
    for key in ("util", "mem_used_gib", "mem_total_gib", "temp_c", "power_w", "sm_clock_mhz"):
        assert f"sys/gpu0/{key}" in metrics, sorted(metrics)
    assert metrics["sys/gpu0/mem_total_gib"] > 1
