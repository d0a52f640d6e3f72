"""GPU check 1, telemetry: every NVML field reslog reads gives a value or NVML's reason, a few
readings agree with nvidia-smi taken between two of ours, and a short run under GPU load stores
every `sys/gpu0/*` key once a second, the throttle reasons included.

    python scripts/gpu/telemetry.py --out OUTDIR [--seconds 8] [--smi-rounds 3]
"""

from __future__ import annotations

import itertools
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpucheck

sys.path.insert(0, str(gpucheck.ROOT / "scripts"))


def load_for(seconds: float, run, device: str) -> int:
    """Keep the GPU busy with bf16 matmuls (so util, power and clocks move), logging a counter."""
    import torch

    dt = torch.bfloat16 if device == "cuda" else torch.float32
    n = 4096 if device == "cuda" else 128
    a = torch.randn(n, n, device=device, dtype=dt)
    end, i = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        for _ in range(8):
            a = (a @ a).clamp_(-1, 1)
        if device == "cuda":
            torch.cuda.synchronize()  # a load loop, not a training loop: pace it by the GPU
        run.log({"load/iter": i}, step=i)
        i += 1
    return i


def stored_every_second(
    points: dict[str, list[tuple[int, float, float | None]]], expected: list[str], seconds: float
) -> list[dict]:
    """Per expected key: how many points, the median gap between their wall times, and whether
    that is about one a second."""
    rows = []
    for key in expected:
        pts = points.get(key, [])
        gaps = [b[1] - a[1] for a, b in itertools.pairwise(pts)]
        median = statistics.median(gaps) if gaps else None
        ok = len(pts) >= max(2, int(seconds) - 2) and median is not None and 0.8 <= median <= 1.25
        rows.append({"key": key, "points": len(pts), "median_gap_s": median, "ok": ok})
    return rows


def main(argv: list[str] | None = None) -> int:
    p = gpucheck.parser(__doc__)
    p.add_argument("--seconds", type=float, default=8.0, help="length of the stored run")
    p.add_argument("--smi-rounds", type=int, default=3)
    args = p.parse_args(argv)
    res, device = gpucheck.start("telemetry", args)

    import check_nvml

    import reslog
    from reslog.training.system import GPU_FIELDS

    nvml_json = args.out / "nvml.json"
    nvml_rc = None
    if not args.cpu_dry_run:
        nvml_rc = check_nvml.main(
            ["--samples", "3", "--smi-rounds", str(args.smi_rounds), "--json", str(nvml_json)]
        )
    nvml = gpucheck.json_or_none(nvml_json)
    unsupported = {
        r["field"] for r in (nvml or {}).get("fields", []) if r["gpu"] == 0 and "error" in r
    }
    expected = [
        f"sys/gpu0/{suffix}"
        for name, (_, suffixes) in GPU_FIELDS.items()
        if name not in unsupported
        for suffix in suffixes
    ]
    if args.cpu_dry_run:
        expected = ["sys/ram_used_gib", "sys/proc_rss_gib"]

    store = args.out / "telemetry.db"
    run = reslog.init(
        project="gpu-check",
        name="telemetry",
        store=str(store),
        system=True,
        system_interval=1.0,
        flush_interval=0.5,
    )
    iters = load_for(args.seconds, run, device)
    run.finish()
    rows = stored_every_second(gpucheck.read_points(store, "telemetry"), expected, args.seconds)
    throttle = next((r for r in rows if r["key"] == "sys/gpu0/throttle"), None)

    fields = (nvml or {}).get("fields", [])
    smi = (nvml or {}).get("smi") or []
    res.details = {
        "check_nvml_exit": nvml_rc,
        "fields": fields,
        "smi": smi,
        "stored": rows,
        "load_iterations": iters,
        "store": str(store),
    }
    stored_ok = all(r["ok"] for r in rows) and (args.cpu_dry_run or bool(throttle))
    smi_ok = bool(smi) and all(r["ok"] for r in smi)
    n_unsup = sum("error" in r for r in fields)
    res.judge(
        nvml_rc == 0 and stored_ok and smi_ok,
        f"{len(fields) - n_unsup}/{len(fields)} fields read ({n_unsup} unsupported, with NVML's "
        f"reason); nvidia-smi agreement {sum(r['ok'] for r in smi)}/{len(smi)}; "
        f"{sum(r['ok'] for r in rows)}/{len(rows)} keys stored about once a second"
        + ("" if throttle or args.cpu_dry_run else "; throttle NOT stored"),
    )
    res.write()
    print(res.summary)
    return res.exit_code()


if __name__ == "__main__":
    sys.exit(main())
