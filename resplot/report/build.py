"""The report: the chosen pages' series read through the viewer's cache and tiles, packed at
the resolution the size budget allows, with the runs, their comparison table and events, into
one HTML file whose page (assets/report.js) draws them. No Qt; `resplot report` and the
window's File > Export > HTML report both call `build_report`.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import io
import json
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources

import numpy as np

from reslog.tools.export import format_cell, render_markdown
from resplot.data.alerts import check_all
from resplot.data.cache import SeriesCache
from resplot.data.key_roles import key_for
from resplot.data.model import RunRef
from resplot.data.pages import panels_for
from resplot.data.smoothing import smoothable, unit_of
from resplot.data.state import ViewState
from resplot.data.xaxis import TOKENS_KEY
from resplot.report import levels as budget
from resplot.report.pack import Packer
from resplot.ui.exports import summaries
from schema.rules.alerts import ALERT
from schema.rules.compare import comparison_table
from schema.store import buckets
from schema.store.rollup import STEP_HI, STEP_LO

REPORT_PAGES = ("training", "system", "timing", "ranks")
DEFAULT_MAX_MB = 10.0
FETCH_ROUNDS = 200  # polls while tiles still arrive (the agent serves 4,096 tiles a request)
ATTEMPTS = 4  # budget passes: the estimate is refined by each measured size


class ReportError(ValueError):
    """Nothing to report (no series on the chosen pages), or a budget too small to hold it."""


@dataclass
class Report:
    html: str
    width: int  # steps a column at the finest embedded level (1: every series raw)
    raw_series: int
    series: int
    notes: list[str] = field(default_factory=list)

    @property
    def bytes(self) -> int:
        return len(self.html.encode("utf-8"))

    def write(self, path: str | os.PathLike[str]) -> None:
        """Beside the target, then renamed into place: a failed write leaves no half a file."""
        target = os.fspath(path)
        tmp = f"{target}.tmp{os.getpid()}"
        try:
            with open(tmp, "w", encoding="utf-8", newline="") as f:
                f.write(self.html)
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)


def _asset(name: str) -> str:
    return resources.files("resplot.report").joinpath("assets", name).read_text("utf-8")


def _fetch_tiles(cache: SeriesCache, fetch: Callable[[], object] | None, wanted: list) -> None:
    """Ask for every tile of each (ref, key, level) and poll until they have all come."""
    for ref, key, level in wanted:
        agg = cache.summary(ref, key).agg
        cache.want_tiles(ref, key, level, buckets.tiles_for(level, agg[STEP_LO], agg[STEP_HI]))
    for _ in range(FETCH_ROUNDS):
        if fetch is None or not cache.wanted_count():
            return
        fetch()


def _tiles(cache: SeriesCache, ref: RunRef, key: str, level: int) -> list | None:
    agg = cache.summary(ref, key).agg
    out = []
    for index in buckets.tiles_for(level, agg[STEP_LO], agg[STEP_HI]):
        tile = cache.tile(ref, key, level, index)
        if tile is None:
            return None
        out.append(tile)
    return out


def _columns(tiles: list, names) -> dict[str, np.ndarray]:
    return {n: np.concatenate([t.cols[n] for t in tiles]) if tiles else np.empty(0) for n in names}


def pack_series(pk: Packer, tiles: list, level: int, wall0: float, smooth: bool) -> dict:
    """One series' columns for the page: raw points (`s`, `v`, `w`), or a level's columns:
    first step `lo`, the extremes' steps as offsets from it, the last step `hi` (offset), the
    extremes and last value (exact), the wall at the last step and the mean (float32: drawn
    only), and which columns hold NaN / +inf / -inf (`bad`: 1, 2, 4; left out when none)."""
    if level == 0:
        c = _columns(tiles, ("step", "wall", "value"))
        return {
            "s": pk.ints(c["step"], delta=True),
            "v": pk.floats(c["value"]),
            "w": pk.floats(c["wall"] - wall0, exact=False),
        }
    names = (
        "step_lo",
        "step_hi",
        "min_at",
        "max_at",
        "vmin",
        "vmax",
        "last",
        "wall_hi",
        "vsum",
        "n",
        "nan",
        "posinf",
        "neginf",
    )
    c = _columns(tiles, names)
    lo = c["step_lo"].astype(np.int64)
    has = np.isfinite(c["vmin"])
    out = {
        "lo": pk.ints(lo, delta=True),
        "hi": pk.ints(c["step_hi"] - lo),
        "mn": pk.ints(np.where(has, c["min_at"] - lo, 0)),
        "mx": pk.ints(np.where(has, c["max_at"] - lo, 0)),
        "vmin": pk.floats(c["vmin"]),
        "vmax": pk.floats(c["vmax"]),
        "last": pk.floats(c["last"]),
        "w": pk.floats(c["wall_hi"] - wall0, exact=False),
    }
    bad = (c["nan"] > 0) * 1 + (c["posinf"] > 0) * 2 + (c["neginf"] > 0) * 4
    if bad.any():
        out["bad"] = pk.ints(bad)
    if smooth:
        finite = c["n"] - c["nan"] - c["posinf"] - c["neginf"]
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(finite > 0, c["vsum"] / np.maximum(finite, 1), np.nan)
            mean = np.where(c["vmin"] == c["vmax"], c["vmin"], np.clip(mean, c["vmin"], c["vmax"]))
        out["mean"] = pk.floats(mean, exact=False)
    return out


def _ranks_png(cache: SeriesCache, fetch) -> tuple[str | None, str]:
    """The Ranks page (its heatmap, drawn as `resplot snapshot --page ranks` draws it) as a
    PNG data URI, or None and why."""
    from resplot.data.ranks import jobs_in
    from resplot.draw.ranks import NO_JOB, render_ranks

    if not jobs_in(cache):
        return None, NO_JOB.replace("\n", " ")
    page = render_ranks(cache, ViewState(page="ranks"), size=(12, 6), dpi=100, fetch=fetch)
    if page.view is None:
        return None, page.message.get_text()
    buf = io.BytesIO()
    page.figure.savefig(buf, format="png", dpi=100)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode(), ""


def _json(value) -> str:
    """JSON safe inside a <script> element (no '</', no line separators JavaScript rejects)."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.replace("</", "<\\/").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def build_report(
    cache: SeriesCache,
    refs: list[RunRef],
    fetch: Callable[[], object] | None = None,
    pages: tuple[str, ...] = ("training",),
    max_bytes: int = int(DEFAULT_MAX_MB * (1 << 20)),
    metrics: list[str] | None = None,
    title: str = "",
    state: ViewState | None = None,
) -> Report:
    """The report of `refs` (in `cache`, read through `fetch`: a source's poll) on `pages`."""
    state = state if state is not None else ViewState()
    state.assign_looks(refs)
    cache.set_tile_limit(max(cache.tile_limit, 4 << 30))  # every embedded tile at once
    notes: list[str] = []
    index: dict[tuple[RunRef, str], int] = {}
    page_out = []
    ranks_img = None
    for page in pages:
        if page == "ranks":
            ranks_img, why = _ranks_png(cache, fetch)
            page_out.append({"name": "ranks", "img": ranks_img, "why": why})
            continue
        panels = []
        for spec in panels_for(page, cache, refs, state):
            if spec.log_refused:
                notes.append(f"{page} page, {spec.title}: y linear, values ≤ 0 (no log)")
            items = []
            for item in spec.items:
                i = index.setdefault((item.ref, item.key), len(index))
                items.append(
                    {
                        "s": i,
                        "label": item.label,
                        "part": item.part,
                        "color": item.color,
                        "dash": item.style != "-",
                        "smooth": item.smooth,
                        "marker": bool(item.marker),
                    }
                )
            kind = "line" if spec.kind in ("line", "stacked", "throttle") else spec.kind
            panels.append(
                {
                    "title": spec.title,
                    "ylabel": spec.ylabel,
                    "log": spec.log_y,
                    "kind": kind,
                    "stacked": spec.kind == "stacked",
                    "items": items,
                }
            )
        page_out.append({"name": page, "panels": panels})
    if not index and "ranks" not in pages:
        raise ReportError(
            f"nothing to report: the {', '.join(pages)} page(s) found no series in the chosen runs"
        )
    guides = {}
    for r, ref in enumerate(refs):
        key = key_for(cache.keys(ref), "tokens") or TOKENS_KEY
        if cache.summary(ref, key) is not None:
            guides[r] = index.setdefault((ref, key), len(index))
    series_keys = list(index)
    run_of = {ref: r for r, ref in enumerate(refs)}
    needs = [budget.Need.of(cache.summary(ref, key)) for ref, key in series_keys]

    runs = []
    for ref in refs:
        info = cache.run(ref)
        end = info.ended_at if info.ended_at is not None else info.heartbeat_at
        runs.append(
            {
                "name": info.name,
                "uid": ref.uid,
                "status": info.status,
                "color": state.look(ref).color,
                "dash": state.look(ref).style != "-",
                "created": info.created_at,
                "seconds": max(0.0, end - info.created_at),
                "host": info.host,
                "source": ref.source,
                "alerts": [],
            }
        )
    header, rows = comparison_table(summaries(cache, refs), metrics)
    table = {
        "header": header,
        "rows": [[format_cell(_finite(v)) for v in row] for row in rows],
        "md": render_markdown(header, rows),
    }
    events = [
        {
            "run": run_of[ref],
            "step": e.step,
            "wall": e.wall,
            "kind": e.kind,
            "level": e.level,
            "title": e.title,
        }
        for ref in refs
        for e in cache.events(ref)
    ]
    # The window's alerts (NaN loss, stalled, crashed, GPU drops, stragglers, ...): in the run
    # table, and as markers where they have a step or a time (logged ones are events above).
    for ref, found in check_all(cache, refs).items():
        for a in found:
            runs[run_of[ref]]["alerts"].append(f"{a.level}: {a.message}")
            if a.kind != ALERT and (a.step is not None or a.wall is not None):
                events.append(
                    {
                        "run": run_of[ref],
                        "step": a.step,
                        "wall": a.wall,
                        "kind": a.kind,
                        "level": a.level,
                        "title": a.message,
                    }
                )
    made = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    meta = {
        "title": title or "resplot report",
        "made": made,
        "pages": page_out,
        "runs": runs,
        "table": table,
        "events": events,
    }
    template, script, css = _asset("report.html"), _asset("report.js"), _asset("report.css")
    fixed = len(template) + len(script) + len(css) + len(_json(meta).encode()) + 2048
    room = max_bytes - fixed
    if room <= 0:
        raise ReportError(
            f"--max-mb {max_bytes / (1 << 20):.3g} is too small: the page and its "
            f"tables alone take {fixed / (1 << 20):.2f} MB"
        )

    # Estimate, pack, measure: the measured ratio corrects the next choice, and the finest
    # choice that fitted is kept (the estimate of deflated bytes is rough).
    ratio, best, tried = 1.0, None, set()
    for _attempt in range(ATTEMPTS):
        width, chosen = budget.choose(needs, room, ratio)
        if tuple(chosen) in tried:
            break
        tried.add(tuple(chosen))
        wanted = [(ref, key, lv) for (ref, key), lv in zip(series_keys, chosen, strict=True)]
        _fetch_tiles(cache, fetch, wanted)
        packed, estimate, pk = [], 0.0, Packer()
        for (ref, key), need, lv in zip(series_keys, needs, chosen, strict=True):
            tiles = _tiles(cache, ref, key, lv)
            info = cache.run(ref)
            summary = cache.summary(ref, key)
            entry = {
                "run": run_of.get(ref, 0),
                "key": key,
                "n": need.n,
                "lo": need.step_lo,
                "hi": need.step_hi,
                "width": buckets.width(lv) if lv else 1,
                "unit": unit_of(summary.agg),
                "smooth": smoothable(key),
                "wall0": info.created_at,
            }
            if tiles is None:
                entry["missing"] = True
            else:
                smooth = smoothable(key) and lv != 0
                entry["cols"] = pack_series(pk, tiles, lv, info.created_at, smooth)
            estimate += need.bytes(lv)
            packed.append(entry)
        stream = pk.stream()
        real = len(stream) + len(_json(packed).encode())
        if real <= room and (best is None or width <= best[0]):
            best = (width, chosen, packed, stream)
        ratio = real / max(estimate, 1.0) * (1.0 if real <= room else 1.05)
    if best is None:
        raise ReportError(
            f"--max-mb {max_bytes / (1 << 20):.3g} cannot hold the coarsest "
            "resolution of these series; choose fewer runs or pages"
        )
    width, chosen, packed, stream = best
    raw = sum(1 for lv in chosen if lv == 0)
    pairs = zip(series_keys, packed, strict=True)
    missing = [f"{cache.run(ref).name}: {key}" for (ref, key), e in pairs if e.get("missing")]
    if raw < len(chosen):
        left = sum(n.n for n, lv in zip(needs, chosen, strict=True) if lv != 0)
        rest = f", the other {raw} as every logged point" if raw else ""
        notes.append(
            f"{len(chosen) - raw} of {len(chosen)} series are embedded as exact columns of "
            f"{width} steps (first step, min and max with their steps, last; {left:,} points "
            f"summarised){rest}. A zoom finer than {width} steps a pixel is drawn coarser than "
            f"its pixels, and the chart says so (budget {max_bytes / (1 << 20):.3g} MB)."
        )
    if missing:
        notes.append(f"not drawn, their tiles did not arrive: {'; '.join(missing)}")
    if ranks_img is None and "ranks" in pages:
        notes.append(f"Ranks page: {page_out[[p['name'] for p in page_out].index('ranks')]['why']}")
    meta.update(
        series=packed,
        guides={str(k): v for k, v in guides.items()},
        notes=notes,
        budget={"max_bytes": max_bytes, "width": width, "raw": raw},
    )
    # One pass over the template: a run named "{{JS}}" stays a name.
    parts = {
        "TITLE": html.escape(meta["title"]),
        "CSS": css,
        "DATA": _json(meta),
        "BIN": stream,
        "JS": script,
    }
    page = re.sub(r"\{\{(TITLE|CSS|DATA|BIN|JS)\}\}", lambda m: parts[m.group(1)], template)
    size = len(page.encode("utf-8"))
    if size > max_bytes:  # the estimate of the fixed part is generous: this never passes it
        raise ReportError(
            f"the report came to {size / (1 << 20):.2f} MB, over --max-mb "
            f"{max_bytes / (1 << 20):.3g}; not written"
        )
    return Report(page, width, raw, len(chosen), notes)
