"""Check reslog's system sampler against the real NVML, and NVML against nvidia-smi, on a GPU host.

    python scripts/check_nvml.py                 # 5 samples, 1 s apart
    CUDA_VISIBLE_DEVICES=1,0 python scripts/check_nvml.py --samples 3 --interval 0.5
    python scripts/check_nvml.py --smi-rounds 3 --json nvml.json   # what scripts/gpu_check.sh runs

Prints the GPUs NVML reports (with the CUDA ordinal each one gets under the current
CUDA_VISIBLE_DEVICES), every field reslog reads with its value or NVML's reason for not giving
one, a table of every metric over the samples, and, with ``--smi-rounds N``, N readings of each
GPU field next to `nvidia-smi --query-gpu` taken between two of ours (agreement within a
tolerance per field). Exits 1 when NVML cannot be initialised, no GPU metric arrived, or a
reading disagrees with nvidia-smi.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from reslog.training.system import GIB, GPU_FIELDS, SystemSampler, visible_devices  # noqa: E402


def describe_gpus(nvml) -> dict[str, Any]:
    driver = _text(nvml.nvmlSystemGetDriverVersion())
    print(f"NVML driver {driver}, {nvml.nvmlDeviceGetCount()} GPU(s)")
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    print(f"CUDA_VISIBLE_DEVICES={cvd!r}")
    gpus = []
    for dev in visible_devices(nvml):
        if dev.handle is None:
            print(f"  cuda:{dev.ordinal}  (no NVML handle)")
            continue
        name = _text(nvml.nvmlDeviceGetName(dev.handle))
        uuid = _text(nvml.nvmlDeviceGetUUID(dev.handle))
        print(f"  cuda:{dev.ordinal}  nvml index {dev.nvml_index}  {name}  {uuid}")
        gpus.append({"ordinal": dev.ordinal, "nvml_index": dev.nvml_index, "name": name})
    return {"driver": driver, "gpus": gpus}


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# --------------------------------------------------------------------------- every field


def nvml_reason(exc: BaseException) -> str:
    """NVML's own words for an error (``NVMLError_NotSupported: Not Supported``)."""
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def field_report(nvml, devices) -> list[dict[str, Any]]:
    """One row per (GPU, field reslog reads): its value(s), or NVML's reason for none."""
    rows = []
    for dev in devices:
        if dev.handle is None:
            continue
        for name, (reader, suffixes) in GPU_FIELDS.items():
            row: dict[str, Any] = {"gpu": dev.ordinal, "field": name, "keys": list(suffixes)}
            try:
                value = reader(nvml, dev.handle)
            except Exception as exc:
                row["error"] = nvml_reason(exc)
            else:
                row["value"] = list(value) if isinstance(value, tuple) else value
            rows.append(row)
    return rows


def print_fields(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        shown = r["error"] if "error" in r else f"{r['value']}"
        status = "unsupported" if "error" in r else "ok"
        print(f"  gpu{r['gpu']} {r['field']:12s} {status:12s} {shown}")


# --------------------------------------------------------------------------- nvidia-smi


@dataclass(frozen=True)
class SmiField:
    """A reslog field next to its nvidia-smi query name(s) and how close they must agree."""

    field: str  # reslog's GPU_FIELDS name
    index: int  # which of the reader's values (memory gives used, total)
    queries: tuple[str, ...]  # nvidia-smi names, newest first
    to_ours: Callable[[str], float]  # nvidia-smi's text (nounits) -> reslog's unit
    tol: float  # allowed distance outside the range of our two readings
    relative: bool = False  # tol is a fraction of the value


def _hex_or_float(text: str) -> float:
    return float(int(text, 16)) if text.lower().startswith("0x") else float(text)


SMI_FIELDS: tuple[SmiField, ...] = (
    SmiField("util", 0, ("utilization.gpu",), float, 10.0),
    SmiField("mem", 0, ("memory.used",), lambda s: float(s) * (1 << 20) / GIB, 0.1),
    SmiField("mem", 1, ("memory.total",), lambda s: float(s) * (1 << 20) / GIB, 0.01),
    SmiField("temp", 0, ("temperature.gpu",), float, 2.0),
    SmiField("power", 0, ("power.draw.instant", "power.draw"), float, 0.10, relative=True),
    SmiField("power_limit", 0, ("enforced.power.limit",), float, 1.0),
    SmiField("fan", 0, ("fan.speed",), float, 2.0),
    SmiField("sm_clock", 0, ("clocks.sm",), float, 0.05, relative=True),
    SmiField(
        "throttle",
        0,
        ("clocks_event_reasons.active", "clocks_throttle_reasons.active"),
        _hex_or_float,
        0.0,
    ),
)
_UNSUPPORTED_TEXT = ("[N/A]", "[Not Supported]", "N/A", "Not Supported", "[Unknown Error]")


def smi_query_names(choice: dict[str, str] | None = None) -> list[str]:
    """The query names to ask for: the first of each field's names, or the ones that worked."""
    choice = choice or {}
    return [choice.get(f.queries[0], f.queries[0]) for f in SMI_FIELDS]


def parse_smi_line(line: str, names: list[str]) -> dict[str, float | None]:
    """One `--format=csv,noheader,nounits` line -> {query name: value or None (N/A)}."""
    cells = [c.strip() for c in line.split(",")]
    if len(cells) != len(names):
        raise ValueError(f"nvidia-smi gave {len(cells)} values for {len(names)} fields: {line!r}")
    out: dict[str, float | None] = {}
    for f, name, cell in zip(SMI_FIELDS, names, cells, strict=True):
        out[name] = None if cell in _UNSUPPORTED_TEXT else f.to_ours(cell)
    return out


def run_smi(nvml_index: int, names: list[str]) -> tuple[str, list[str]]:
    """nvidia-smi's line for one GPU; a field name this driver does not know is replaced by
    its older spelling (e.g. clocks_throttle_reasons before clocks_event_reasons)."""
    names = list(names)
    for _ in range(len(SMI_FIELDS)):
        proc = subprocess.run(
            [
                "nvidia-smi",
                f"--id={nvml_index}",
                f"--query-gpu={','.join(names)}",
                "--format=csv,noheader,nounits",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if proc.returncode == 0:
            return proc.stdout.strip().splitlines()[0], names
        said = re.search(r'Field "([^"]+)"', proc.stdout + proc.stderr)  # "... is not a valid"
        bad = said.group(1) if said and said.group(1) in names else None
        spelled = next((f for f in SMI_FIELDS if bad in f.queries), None)
        if bad is None or spelled is None or spelled.queries[-1] == bad:
            raise RuntimeError(f"nvidia-smi failed: {(proc.stdout + proc.stderr).strip()}")
        names[names.index(bad)] = spelled.queries[spelled.queries.index(bad) + 1]
    raise RuntimeError("nvidia-smi refused every spelling of the query fields")


def _ours(row_values: dict[str, Any], f: SmiField) -> float | None:
    v = row_values.get(f.field)
    if v is None:
        return None
    return float(v[f.index]) if isinstance(v, list) else float(v)


def compare_round(
    before: list[dict[str, Any]],
    smi: dict[str, float | None],
    after: list[dict[str, Any]],
    names: list[str],
) -> list[dict[str, Any]]:
    """Each field: nvidia-smi's value against the range of our readings before and after it.
    A field both report as unsupported agrees; one side only is a disagreement."""
    b = {r["field"]: r.get("value") for r in before}
    a = {r["field"]: r.get("value") for r in after}
    rows = []
    for f, name in zip(SMI_FIELDS, names, strict=True):
        ours = [x for x in (_ours(b, f), _ours(a, f)) if x is not None]
        theirs = smi.get(name)
        row: dict[str, Any] = {"field": name, "smi": theirs, "ours": ours}
        if theirs is None or not ours:
            row["ok"] = theirs is None and not ours
            row["note"] = "unsupported on both" if row["ok"] else "unsupported on one side only"
        elif f.field == "throttle":  # a bitmask: equal to one of ours, bits can flip between
            row["ok"] = theirs in ours
        else:
            lo, hi = min(ours), max(ours)
            slack = f.tol * max(abs(lo), abs(hi)) if f.relative else f.tol
            row["ok"] = lo - slack <= theirs <= hi + slack
            row["tol"] = slack
        rows.append(row)
    return rows


def compare_with_smi(nvml, devices, rounds: int) -> list[dict[str, Any]]:
    """``rounds`` readings per GPU: ours, nvidia-smi, ours again."""
    out = []
    choice: dict[str, str] = {}
    for dev in devices:
        if dev.handle is None or dev.nvml_index is None:
            continue
        for k in range(rounds):
            before = field_report(nvml, [dev])
            line, names = run_smi(dev.nvml_index, smi_query_names(choice))
            choice.update({f.queries[0]: n for f, n in zip(SMI_FIELDS, names, strict=True)})
            after = field_report(nvml, [dev])
            for row in compare_round(before, parse_smi_line(line, names), after, names):
                out.append({"gpu": dev.ordinal, "round": k + 1, **row})
    return out


def print_comparison(rows: list[dict[str, Any]]) -> None:
    print(
        f"{'gpu':>3} {'round':>5} {'field':32s} {'nvidia-smi':>12} {'reslog (before, after)':>26}"
    )
    for r in rows:
        ours = ", ".join(f"{v:.3f}" for v in r["ours"]) or "-"
        smi = "-" if r["smi"] is None else f"{r['smi']:.3f}"
        flag = "ok" if r["ok"] else "DIFFERS"
        print(f"{r['gpu']:>3} {r['round']:>5} {r['field']:32s} {smi:>12} {ours:>26}  {flag}")


# --------------------------------------------------------------------------- main


def sample(interval: float, n: int) -> tuple[list[dict[str, float]], SystemSampler]:
    samples: list[dict[str, float]] = []
    done = threading.Event()

    def emit(metrics: dict[str, float], wall: float) -> None:
        samples.append(metrics)
        if len(samples) >= n:
            done.set()

    sampler = SystemSampler(emit, interval)
    sampler.start()
    done.wait(n * interval + 30)
    sampler.stop(5)
    return samples, sampler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument(
        "--smi-rounds", type=int, default=0, help="readings to compare with nvidia-smi (0: none)"
    )
    parser.add_argument("--json", type=Path, help="also write everything here as JSON")
    parser.add_argument("-v", "--verbose", action="store_true", help="show debug lines")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING)

    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:
        print(f"NVML unavailable: {exc!r}", file=sys.stderr)
        return 1
    report: dict[str, Any] = {"nvml": describe_gpus(pynvml)}
    devices = visible_devices(pynvml)
    print("\nfields (value, or NVML's reason):")
    report["fields"] = field_report(pynvml, devices)
    print_fields(report["fields"])
    if args.smi_rounds:
        if shutil.which("nvidia-smi") is None:
            print("nvidia-smi is not on PATH: no comparison", file=sys.stderr)
            report["smi"] = None
        else:
            report["smi"] = compare_with_smi(pynvml, devices, args.smi_rounds)
            print()
            print_comparison(report["smi"])
    pynvml.nvmlShutdown()

    samples, sampler = sample(args.interval, args.samples)
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
    report["samples"] = samples
    gpu_metrics = any(k.startswith("sys/gpu") for k in keys)
    smi_ok = all(r["ok"] for r in report.get("smi") or [])
    report["ok"] = gpu_metrics and smi_ok
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str))
    if not gpu_metrics:
        print("no GPU metric arrived", file=sys.stderr)
        return 1
    if not smi_ok:
        print("some readings disagree with nvidia-smi (DIFFERS above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
