"""`resplot report` at the issue's sizes: the file's size, the time to build it, and the time
headless Chromium takes from navigation to every chart drawn.

    .venv/bin/python scripts/bench/bench_report.py                      # 12 runs x 20,000 x 8
    .venv/bin/python scripts/bench/bench_report.py --values float64     # every value float64
    .venv/bin/python scripts/bench/bench_report.py --runs 100 --steps 100000 --keys 1

The store is written through reslog's public API (reslog.init / run.log) and kept beside its
marker for reruns. Values: `realistic` logs what a trainer logs (loss and grad norm from float32
tensors, the token count an integer, lr, tokens/s and MFU as Python floats); `float64` makes
every value float64 noise (no value packs as float32: the worst case for size). The baseline,
opened in the same browser in the same run, is the report of one run of 1,000 steps: the ratio
is what the data costs the page to open.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import run_text
from logged_keys import TRAIN_STEP, VALID

ROOT = Path(__file__).resolve().parents[2]
KEYS = [*TRAIN_STEP, *VALID]


def make_store(path: Path, runs: int, steps: int, keys: int, values: str) -> None:
    marker = path.with_suffix(".json")
    shape = {"runs": runs, "steps": steps, "keys": keys, "values": values}
    if marker.exists() and json.loads(marker.read_text()) == shape and path.exists():
        return
    import numpy as np

    import reslog

    for p in path.parent.glob(path.name + "*"):
        p.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    names = KEYS[:keys]
    for r in range(runs):
        rng = np.random.default_rng(r)
        s = np.arange(steps, dtype=np.float64)
        loss = 4 * np.exp(-s / (steps / 3)) + 2 + 0.05 * rng.standard_normal(steps)
        loss[steps // 3 + r] = 50.0  # a one-step spike per run
        cols = {
            "train/loss": loss.astype(np.float32),
            "train/lr": 3e-4 * np.minimum(1, s / 500) * (0.5 + 0.5 * np.cos(np.pi * s / steps)),
            "train/grad_norm": (1 + 0.3 * rng.standard_normal(steps) ** 2).astype(np.float32),
            "train/tokens": 524288.0 * (s + 1),
            "train/tokens_per_s": 2.1e5 + 3e3 * rng.standard_normal(steps),
            "train/mfu": 0.41 + 0.01 * rng.standard_normal(steps),
            "valid/loss": (loss + 0.1).astype(np.float32),
            "valid/ppl": np.exp(loss + 0.1).astype(np.float32),
        }
        if values == "float64":
            cols = {
                k: v.astype(np.float64) + 1e-9 * rng.standard_normal(steps) for k, v in cols.items()
            }
        run = reslog.init(
            project="report",
            name=f"run{r:03d}",
            store=str(path),
            system=False,
            config={"lr": 3e-4 * (1 + r % 4), "seed": r},
        )
        lists = {k: cols[k].astype(np.float64).tolist() for k in names}
        for i in range(steps):
            run.log({k: lists[k][i] for k in names}, step=i)
        if not run.finish(timeout=600):
            raise SystemExit(f"run {r}: the store did not take every point")
        print(f"  store: run {r + 1}/{runs}", file=sys.stderr, end="\r")
    marker.write_text(json.dumps(shape))


def build(store: Path, out: Path, max_mb: float) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t = time.perf_counter()
    argv = [sys.executable, "-m", "resplot", "report", store, "-o", out, "--max-mb", max_mb]
    done = run_text(argv, env=env, check=True)
    return time.perf_counter() - t, done.stderr.strip().splitlines()[-1]


def open_times(files: list[Path], repeats: int) -> list[list[float]]:
    from selenium import webdriver

    home = Path(tempfile.mkdtemp(prefix="bench-report-"))
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--proxy-server=127.0.0.1:9",
        "--proxy-bypass-list=<-loopback>",
        "--window-size=1280,800",
        f"--user-data-dir={home}",
    ):
        opts.add_argument(arg)
    service = webdriver.ChromeService(
        executable_path=shutil.which("chromedriver"), env={**os.environ, "HOME": str(home)}
    )
    driver = webdriver.Chrome(options=opts, service=service)
    size = {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", size)
    out = [[] for _ in files]
    try:
        for _ in range(repeats):
            for i, f in enumerate(files):
                driver.get("about:blank")
                driver.get(f.as_uri())
                ms = None
                for _ in range(600):  # the data inflate asynchronously: wait for the drawing
                    ms = driver.execute_script(
                        "return window.resplotReport && resplotReport.readyAt"
                    )
                    if ms:
                        break
                    time.sleep(0.02)
                errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
                if ms is None or errors:
                    raise SystemExit(f"{f}: the page did not draw: {errors}")
                parts = driver.execute_script("return resplotReport.timings")
                out[i].append((ms / 1000, parts))
    finally:
        driver.quit()
        shutil.rmtree(home, ignore_errors=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=12)
    ap.add_argument("--steps", type=int, default=20_000)
    ap.add_argument("--keys", type=int, default=8, choices=range(1, len(KEYS) + 1))
    ap.add_argument("--values", choices=("realistic", "float64"), default="realistic")
    ap.add_argument("--max-mb", type=float, default=10.0)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/reslog-report-bench"))
    args = ap.parse_args()
    name = f"{args.runs}x{args.steps}x{args.keys}-{args.values}"
    store, base_store = args.dir / f"{name}.db", args.dir / "baseline-1x1000.db"
    t = time.perf_counter()
    make_store(store, args.runs, args.steps, args.keys, args.values)
    make_store(base_store, 1, 1000, args.keys, "realistic")
    print(f"stores ready in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    out, base_out = args.dir / f"{name}.html", args.dir / "baseline.html"
    build_s, line = build(store, out, args.max_mb)
    build(base_store, base_out, args.max_mb)
    opened, base_opened = open_times([out, base_out], args.repeats)
    page = statistics.median(t for t, _ in opened)
    base = statistics.median(t for t, _ in base_opened)
    parts = {
        k: statistics.median(p[k] for _, p in opened) / 1000
        for k in ("start", "inflate", "decode", "draw")
    }
    mb = out.stat().st_size / (1 << 20)
    print(
        f"| shape | --max-mb | file MB | build s | open to drawn s (median of {args.repeats}) "
        "| baseline open s | ratio |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    print(
        f"| {args.runs} runs x {args.steps:,} steps x {args.keys} keys ({args.values}) | "
        f"{args.max_mb:g} | {mb:.2f} | {build_s:.1f} | {page:.3f} | {base:.3f} | "
        f"{page / base:.1f}x |"
    )
    print(
        "of which (medians, s): "
        + ", ".join(f"{k} {v:.3f}" for k, v in parts.items())
        + " (start: navigation to the page's script, the HTML parsed)"
    )
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"resplot: {line}")


if __name__ == "__main__":
    main()
