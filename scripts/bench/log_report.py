"""The report of bench_log.py: markdown tables and the issue's targets, met or not."""

from __future__ import annotations

import statistics
from typing import Any

from competitors import KEYS

TARGETS = {
    "caller_median_us": 3.0,
    "caller_p99_us": 30.0,
    "cpu_vs_raw": 1.5,
    "ingest_pps": 400_000.0,
    "gil_stolen_pct": 1.0,
    "readback_s": 0.15,
    "kill_intervals": 1.0,
}


# -- tables ---------------------------------------------------------------------------------------


def met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def fmt(x: float, digits: int = 1) -> str:
    return f"{x:,.{digits}f}"


def report_caller(rows: list[dict[str, Any]]) -> tuple[list[str], dict[str, float]]:
    by = {r["name"]: r for r in rows if "unavailable" not in r}
    floor = by.get("append", {}).get("caller_median_us")
    raw_cpu = by.get("sqlite", {}).get("cpu_per_step_us")
    lines = [
        "| tracker | version | steps | caller median µs | caller p99 µs | × append (median) "
        "| CPU/step µs (process) | + helper processes µs | total CPU × raw executemany |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        if "unavailable" in r:
            lines.append(f"| {r['name']} | unavailable: {r['unavailable']} |" + " |" * 7)
            continue
        cpu = r["cpu_per_step_us"] + r["helper_cpu_per_step_us"]
        steps = f"{r['steps']:,}" + (" (capped)" if r["capped"] else "")
        x_floor = fmt(r["caller_median_us"] / floor) if floor else "-"
        x_raw = fmt(cpu / raw_cpu, 2) if raw_cpu else "-"
        lines.append(
            f"| {r['name']} | {r.get('version', '')} | {steps} | {fmt(r['caller_median_us'], 2)} "
            f"| {fmt(r['caller_p99_us'], 2)} | {x_floor} | {fmt(r['cpu_per_step_us'])} "
            f"| {fmt(r['helper_cpu_per_step_us'])} | {x_raw} |"
        )
    found: dict[str, float] = {}
    if "reslog" in by:
        r = by["reslog"]
        found["caller_median_us"] = r["caller_median_us"]
        found["caller_p99_us"] = r["caller_p99_us"]
        if raw_cpu:
            found["cpu_vs_raw"] = (r["cpu_per_step_us"] + r["helper_cpu_per_step_us"]) / raw_cpu
        if r["stored_points"] != r["logged_points"]:
            lines.append(f"\nreslog stored {r['stored_points']} of {r['logged_points']} points!")
    return lines, found


def measured(results: dict[str, Any], name: str, title: str, out: list[str]) -> dict | None:
    """results[name] where it was measured; None where it is absent, or unavailable (then said
    in `out` under `title`)."""
    r = results.get(name)
    if r is not None and "unavailable" in r:
        out += [f"{title}: unavailable: {r['unavailable']}", ""]
        return None
    return r


def report(results: dict[str, Any], args) -> str:
    out: list[str] = []
    found: dict[str, float] = {}
    cpu_only: dict[str, float] = {}  # the same by CPU time: what an idle machine would show
    if "caller" in results:
        lines, found = report_caller(results["caller"])
        out += [f"### Caller cost, {args.steps:,} steps × 8 scalars", "", *lines, ""]
    r = measured(results, "ingest", "Ingest", out)
    if r is not None:
        found["ingest_pps"] = r["stored"] / r["wall_s"]
        cpu_only["ingest_pps"] = r["stored"] / r["cpu_s"]
        out += [
            f"Ingest: {r['points']:,} points logged in {fmt(r['log_s'], 3)} s, all stored "
            f"by finish() at {fmt(r['wall_s'], 3)} s ({r['stored']:,} stored): "
            f"**{found['ingest_pps']:,.0f} points/s** ({r['stored'] / r['cpu_s']:,.0f} per "
            f"CPU second); the same points by raw executemany right after: "
            f"{r['raw_stored'] / r['raw_wall_s']:,.0f} points/s "
            f"({r['raw_stored'] / r['raw_cpu_s']:,.0f} per CPU second)",
            "",
        ]
    r = measured(results, "gil", "GIL", out)
    if r is not None:
        bl = r["blocks"]

        def med(label: str, field: str) -> float:
            return statistics.median(m[field] for m in bl[label]) * 100

        def stolen(label: str, field: str) -> float:  # median of per-block differences
            pairs = zip(bl[label], bl["without"], strict=True)
            return statistics.median(a[field] - b[field] for a, b in pairs) * 100

        found["gil_stolen_pct"] = stolen("reslog", "blocked")
        out += [
            f"GIL: {len(bl['without'])} blocks of {r['steps']} pure-Python busy steps of "
            f"{fmt(r['step_ms'], 2)} ms CPU each, without reslog, with reslog "
            "(system=False) and with reslog + system sampler, in rotating order; default "
            "flush_interval (1 s).",
            "",
            "| | without | reslog | reslog + system |",
            "| --- | ---: | ---: | ---: |",
            "| wall − thread CPU, % of wall (median) | "
            + " | ".join(f"{med(k, 'wait'):.2f}" for k in bl)
            + " |",
            "| of which asleep (not run queue): GIL wait, % | "
            + " | ".join(f"{med(k, 'blocked'):.2f}" for k in bl)
            + " |",
            "| stolen: asleep − asleep without, % (median of per-block differences) | | "
            + " | ".join(f"**{stolen(k, 'blocked'):+.2f}**" for k in list(bl)[1:])
            + " |",
            "| background threads' CPU, % of wall (upper bound on GIL held) | | "
            + " | ".join(f"{med(k, 'background_cpu'):.2f}" for k in list(bl)[1:])
            + " |",
            "",
        ]
    r = measured(results, "readback", "Read-back", out)
    if r is not None:
        found["readback_s"] = min(r[k]["wall_s"] for k in ("fetch_points", "series", "agent"))
        cpu_only["readback_s"] = min(r[k]["cpu_s"] for k in ("fetch_points", "series", "agent"))
        ways = {
            "fetch_points": "`schema.store.read.fetch_points` (one query, whole run)",
            "series": f"`schema.store.read.series` × {r['keys']} keys",
            "agent": "`reslog.agent.Store.points` (packed binary rows, as sent over SSH)",
        }
        out += [
            "Read-back of the caller part's store, best of 3 (engine open "
            f"{fmt(r['open_s'], 3)} s not counted):",
            "",
            "| path | points | wall s | CPU s |",
            "| --- | ---: | ---: | ---: |",
            *(
                f"| {ways[k]} | {r[k]['n']:,} | {fmt(r[k]['wall_s'], 3)} "
                f"| {fmt(r[k]['cpu_s'], 3)} |"
                for k in ways
            ),
            "",
        ]
    r = measured(results, "kill", "SIGKILL", out)
    if r is not None:
        found["kill_intervals"] = max(t["lost_intervals"] for t in r["trials"])
        trials = "; ".join(
            f"{t['stored']:,}/{t['logged']:,} stored, lost {t['lost_intervals']:.2f}"
            for t in r["trials"]
        )
        out += [
            f"SIGKILL while logging {r['rate']:.0f} steps/s × 8 scalars, flush_interval "
            f"{r['flush']} s: {trials} (flush intervals)",
            "",
        ]
    names = {
        "caller_median_us": ("caller cost median", "≤ 3 µs", "{:.2f} µs"),
        "caller_p99_us": ("caller cost p99", "≤ 30 µs", "{:.2f} µs"),
        "cpu_vs_raw": ("total CPU vs raw executemany", "≤ 1.5×", "{:.2f}×"),
        "ingest_pps": ("sustained ingest", "≥ 400,000 points/s", "{:,.0f} points/s"),
        "gil_stolen_pct": ("GIL share stolen from a 1 ms step", "< 1 %", "{:+.2f} %"),
        "readback_s": ("read-back of 160,000 points", "≤ 0.15 s", "{:.3f} s"),
        "kill_intervals": ("SIGKILL loss", "≤ 1 flush interval", "{:.2f} intervals"),
    }
    out += [
        "| target | wanted | measured | | by CPU time (idle machine) |",
        "| --- | --- | ---: | --- | ---: |",
    ]
    for key, (label, wanted, form) in names.items():
        if key not in found:
            continue
        value = found[key]
        goal = TARGETS[key]
        ok = value >= goal if key == "ingest_pps" else value <= goal
        if key == "gil_stolen_pct":
            ok = value < goal
        if key == "readback_s" and args.steps * len(KEYS) != 160_000:
            label += f" (here {args.steps * len(KEYS):,})"
        by_cpu = form.format(cpu_only[key]) if key in cpu_only else ""
        out.append(f"| {label} | {wanted} | {form.format(value)} | {met(ok)} | {by_cpu} |")
    return "\n".join(out)
