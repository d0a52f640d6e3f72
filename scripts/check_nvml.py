"""Check reslog's system sampler against the real NVML on a GPU host.

    python scripts/check_nvml.py                 # 5 samples, 1 s apart
    CUDA_VISIBLE_DEVICES=1,0 python scripts/check_nvml.py --samples 3 --interval 0.5

Prints the GPUs NVML reports (with the CUDA ordinal each one gets under the current
CUDA_VISIBLE_DEVICES), a table of every metric over the samples, and the fields each GPU could
not report. Compare with `nvidia-smi -q -d UTILIZATION,MEMORY,TEMPERATURE,POWER,CLOCK,PERFORMANCE`.
Exits 1 when NVML cannot be initialised or no GPU metric arrived.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading

from reslog.training.system import SystemSampler, visible_devices


def describe_gpus(nvml) -> None:
    driver = _text(nvml.nvmlSystemGetDriverVersion())
    print(f"NVML driver {driver}, {nvml.nvmlDeviceGetCount()} GPU(s)")
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    print(f"CUDA_VISIBLE_DEVICES={cvd!r}")
    for dev in visible_devices(nvml):
        if dev.handle is None:
            print(f"  cuda:{dev.ordinal}  (no NVML handle)")
            continue
        name = _text(nvml.nvmlDeviceGetName(dev.handle))
        uuid = _text(nvml.nvmlDeviceGetUUID(dev.handle))
        print(f"  cuda:{dev.ordinal}  nvml index {dev.nvml_index}  {name}  {uuid}")


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("-v", "--verbose", action="store_true", help="show debug lines")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING)

    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:
        print(f"NVML unavailable: {exc!r}", file=sys.stderr)
        return 1
    describe_gpus(pynvml)

    samples: list[dict[str, float]] = []
    done = threading.Event()

    def emit(metrics: dict[str, float], wall: float) -> None:
        samples.append(metrics)
        if len(samples) >= args.samples:
            done.set()

    sampler = SystemSampler(emit, args.interval)
    sampler.start()
    done.wait(args.samples * args.interval + 30)
    sampler.stop(5)
    pynvml.nvmlShutdown()

    keys = sorted({k for s in samples for k in s})
    width = max(len(k) for k in keys) if keys else 10
    print()
    print(f"{'metric':{width}s} " + " ".join(f"{f'#{i + 1}':>10s}" for i in range(len(samples))))
    for key in keys:
        cells = [f"{s[key]:10.2f}" if key in s else f"{'-':>10s}" for s in samples]
        print(f"{key:{width}s} " + " ".join(cells))
    print()
    for dev in sampler.devices:
        missing = ", ".join(sorted(dev.unsupported)) or "none"
        print(f"gpu{dev.ordinal}: fields not supported: {missing}")
    if not any(k.startswith("sys/gpu") for k in keys):
        print("no GPU metric arrived", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
