"""The GPU check's report: every check's result file in OUTDIR as one table (printed) and
``OUTDIR/report.md`` (device, driver and torch version first, then each check's details).

    python scripts/gpu/summary.py --out OUTDIR [--expect telemetry,nosync,...]

Exit 0 when every expected check ran and none failed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpucheck

# What each issue item is checked by, in the order.
CHECKS = {
    "telemetry": "1. telemetry (NVML fields, nvidia-smi, 1 s storage)",
    "nosync": "2. no sync from logging",
    "timers": "3. CUDA-event timers add up",
    "kernel_parity": "4. kernels agree in bf16",
    "speed": "5. speed and MFU",
    "overhead": "6. logging overhead",
    "ddp_resume": "7. torchrun DDP + compile, resume",
    "pytest_cuda": "tests marked cuda",
}


def load(out: Path) -> dict[str, dict]:
    results = {}
    for path in sorted(out.glob("*.json")):
        record = gpucheck.json_or_none(path)
        if isinstance(record, dict) and "check" in record and "ok" in record:
            results[record["check"]] = record
    return results


def verdict(record: dict | None) -> str:
    if record is None:
        return "did not run"
    return {True: "met", False: "NOT MET", None: "measured"}[record["ok"]]


def report(out: Path, expect: list[str]) -> tuple[str, bool]:
    results = load(out)
    names = [*expect, *sorted(set(results) - set(expect))]
    device = next((r["device"] for r in results.values() if r.get("device")), {})
    rows = [
        [CHECKS.get(n, n), verdict(results.get(n)), (results.get(n) or {}).get("summary", "")]
        for n in names
    ]
    lines = [
        "# GPU check report",
        "",
        f"Device: {device.get('gpu')} (compute capability {device.get('capability')}, "
        f"{device.get('memory_gib')} GiB, {device.get('sms')} SMs), driver {device.get('driver')}, "
        f"torch {device.get('torch')} (CUDA {device.get('cuda')}), triton {device.get('triton')}, "
        f"Python {device.get('python')}.",
        "",
        gpucheck.markdown_table(["check", "verdict", "result"], rows),
    ]
    for n in names:
        r = results.get(n)
        if r is None:
            continue
        lines += ["", f"## {CHECKS.get(n, n)}", "", r["summary"], ""]
        table = r["details"].get("table")
        if table:
            lines += [table, ""]
        lines += ["```json", json.dumps(r["details"], indent=1, default=str)[:20000], "```"]
    ok = all(results.get(n) is not None and results[n]["ok"] is not False for n in expect) and all(
        r["ok"] is not False for r in results.values()
    )
    return "\n".join(lines) + "\n", ok


def pytest_result(out: Path, junit: Path, dry_run: bool = False) -> None:
    """The tests marked ``cuda`` as a check result, from pytest's JUnit XML."""
    import xml.etree.ElementTree as ET

    res = gpucheck.Result("pytest_cuda", out, dry_run)
    try:
        root = ET.parse(junit).getroot()
    except (OSError, ET.ParseError) as e:
        res.judge(False, f"no pytest result ({e})")
        res.write()
        return
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    n = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    failed = [
        c.get("name")
        for c in suite.iter("testcase")
        if c.find("failure") is not None or c.find("error") is not None
    ]
    skipped = {
        c.get("name"): (c.find("skipped").get("message") or "")
        for c in suite.iter("testcase")
        if c.find("skipped") is not None
    }
    res.details = {**n, "failed": failed, "skipped_reasons": skipped}
    passed = n["tests"] - n["failures"] - n["errors"] - n["skipped"]
    res.judge(
        not failed and passed > 0,
        f"{passed} passed, {n['failures'] + n['errors']} failed, {n['skipped']} skipped"
        + (f" ({'; '.join(sorted(set(skipped.values())))})" if skipped else ""),
    )
    res.write()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--expect", default=",".join(CHECKS), help="checks that should have run")
    p.add_argument("--pytest-junit", type=Path, help="turn this JUnit XML into a result first")
    p.add_argument("--cpu-dry-run", action="store_true", help="the tests ran without a GPU")
    args = p.parse_args(argv)
    if args.pytest_junit:
        pytest_result(args.out, args.pytest_junit, args.cpu_dry_run)
    expect = [s for s in args.expect.split(",") if s]
    text, ok = report(args.out, expect)
    (args.out / "report.md").write_text(text)
    results = load(args.out)
    width = max(len(CHECKS.get(n, n)) for n in [*expect, *results])
    print(f"{'check':{width}s}  {'verdict':11s}  result")
    for n in [*expect, *sorted(set(results) - set(expect))]:
        r = results.get(n)
        print(f"{CHECKS.get(n, n):{width}s}  {verdict(r):11s}  {(r or {}).get('summary', '')}")
    print(f"\nreport: {args.out / 'report.md'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
