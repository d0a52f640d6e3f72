// resplot report page: draws the series embedded in this file on plain canvases (no library,
// no request to anything outside the file). Written for resplot; MIT like the rest of it.
//
// Each series comes raw (every logged point) or as exact columns of W steps (first step, min
// and max with their steps, last): the viewer's tiles. Coarser columns are built here from
// them (extremes and lasts combine exactly), and a chart draws each series from the coarsest
// columns that still give one a pixel, through their extremes (as resplot/data/views.py), then
// keeps first/min/max/last of each pixel column (M4): a one-step spike is drawn at every zoom.
"use strict";
(function () {
  const T0 = performance.now();
  const D = JSON.parse(document.getElementById("report-data").textContent);
  const T1 = performance.now();
  const $ = (id) => document.getElementById(id);
  const HOUR = 3600, DAY = 86400;

  // ---- columns ---------------------------------------------------------------------------
  const SIZES = { i1: 1, i2: 2, i4: 4, f4: 4, f8: 8 };
  const TYPES = { i1: Int8Array, i2: Int16Array, i4: Int32Array, f4: Float32Array, f8: Float64Array };
  let BIN = null; // the inflated column stream

  async function inflate() {
    const text = $("report-bin").textContent.trim();
    let bytes;
    if (Uint8Array.fromBase64) bytes = Uint8Array.fromBase64(text);
    else {
      const bin = atob(text), n = bin.length;
      bytes = new Uint8Array(n);
      for (let i = 0; i < n; i++) bytes[i] = bin.charCodeAt(i);
    }
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }

  // A column of the stream (pack.py): its bytes un-shuffled, viewed as its type, the delta
  // coding undone; always a Float64Array (exact: int32 and float32 widen without loss).
  function unpack(c) {
    const size = SIZES[c.t], n = c.n, src = BIN.subarray(c.o, c.o + n * size);
    let a;
    if (size === 1) a = new Int8Array(src.buffer, src.byteOffset, n);
    else if (size === 2) { // un-shuffle a word at a time (little-endian, as every browser is)
      const w = new Uint16Array(n);
      for (let i = 0; i < n; i++) w[i] = src[i] | (src[n + i] << 8);
      a = new Int16Array(w.buffer);
    } else {
      const w = new Uint32Array(n * size / 4), n2 = 2 * n, n3 = 3 * n;
      for (let k = 0; k < size / 4; k++) {
        const base = 4 * k * n;
        for (let i = 0; i < n; i++) {
          const p = base + i;
          w[i * size / 4 + k] = (src[p] | (src[p + n] << 8) | (src[p + n2] << 16) | (src[p + n3] << 24)) >>> 0;
        }
      }
      a = new TYPES[c.t](w.buffer, 0, n);
    }
    const out = new Float64Array(n);
    if (c.z) { let acc = c.f; for (let i = 0; i < n; i++) { acc += a[i]; out[i] = acc; } }
    else out.set(a);
    return out;
  }

  // A level: per column lo, hi (first and last step), mnAt/mn, mxAt/mx, last, wall (at hi,
  // seconds from the run's start), mean (smoothing), bad (1 NaN, 2 +inf, 4 -inf), width.
  function baseLevel(s) {
    const c = s.cols;
    if (s.width === 1) {
      const st = unpack(c.s), v = unpack(c.v), w = unpack(c.w), n = st.length;
      const bad = new Uint8Array(n);
      for (let i = 0; i < n; i++) if (!isFinite(v[i])) bad[i] = v[i] !== v[i] ? 1 : v[i] > 0 ? 2 : 4;
      return { width: 1, raw: true, n, lo: st, hi: st, mnAt: st, mxAt: st, mn: v, mx: v, last: v,
        wall: w, mean: v, bad };
    }
    const lo = unpack(c.lo), n = lo.length;
    const off = (name) => { const a = unpack(c[name]); for (let i = 0; i < n; i++) a[i] += lo[i]; return a; };
    const L = { width: s.width, raw: false, n, lo, hi: off("hi"), mnAt: off("mn"), mxAt: off("mx"),
      mn: unpack(c.vmin), mx: unpack(c.vmax), last: unpack(c.last), wall: unpack(c.w),
      mean: c.mean ? unpack(c.mean) : null, bad: c.bad ? unpack(c.bad) : new Uint8Array(n) };
    if (!L.mean) L.mean = L.last;
    return L;
  }

  // Columns of `width` steps from finer ones (aligned at multiples of the width), exactly.
  function coarser(L, width) {
    const n = L.n, idx = [];
    let prev = NaN;
    for (let i = 0; i < n; i++) { const b = Math.floor(L.lo[i] / width); if (b !== prev) { idx.push(i); prev = b; } }
    const m = idx.length; idx.push(n);
    const F = () => new Float64Array(m);
    const O = { width, raw: false, n: m, lo: F(), hi: F(), mnAt: F(), mxAt: F(), mn: F(), mx: F(),
      last: F(), wall: F(), mean: F(), bad: new Uint8Array(m) };
    for (let k = 0; k < m; k++) {
      const a = idx[k], b = idx[k + 1];
      let mn = Infinity, mnAt = 0, mx = -Infinity, mxAt = 0, bad = 0, sum = 0, wsum = 0;
      for (let i = a; i < b; i++) {
        const v1 = L.mn[i], v2 = L.mx[i];
        if (isFinite(v1) && v1 < mn) { mn = v1; mnAt = L.mnAt[i]; }
        if (isFinite(v2) && v2 > mx) { mx = v2; mxAt = L.mxAt[i]; }
        bad |= L.bad[i];
        const wt = L.hi[i] - L.lo[i] + 1, mean = L.mean[i];
        if (isFinite(mean)) { sum += mean * wt; wsum += wt; }
      }
      O.lo[k] = L.lo[a]; O.hi[k] = L.hi[b - 1]; O.last[k] = L.last[b - 1]; O.wall[k] = L.wall[b - 1];
      O.mn[k] = mn === Infinity ? NaN : mn; O.mx[k] = mx === -Infinity ? NaN : mx;
      O.mnAt[k] = mnAt; O.mxAt[k] = mxAt; O.bad[k] = bad; O.mean[k] = wsum ? sum / wsum : NaN;
    }
    return O;
  }

  const runs = D.runs.map((r, i) => Object.assign({ id: i, on: true }, r));
  let series = [];
  // Each series' columns are decoded when a chart (or the tokens axis) first reads them: a
  // page's tab costs its own series only.
  function decodeSeries() {
    series = D.series.map((s) => {
      const out = { run: s.run, key: s.key, width: s.width, unit: s.unit, n: s.n, wall0: s.wall0,
        smooth: s.smooth, missing: !!s.missing, lo: s.lo, hi: s.hi };
      let levels = null;
      Object.defineProperty(out, "levels", { get() {
        if (levels === null) {
          levels = [];
          if (out.missing) return levels;
          const base = baseLevel({ width: s.width, cols: s.cols });
          levels.push(base);
          let L = base, w = Math.max(4, base.width * 4);
          while (L.n > 256) { L = coarser(L, w); levels.push(L); w *= 4; }
        }
        return levels;
      } });
      return out;
    });
  }

  // ---- x axes ----------------------------------------------------------------------------
  const view = { page: 0, xmode: "step", smoothing: 0.6, logy: true, range: null, hover: null };

  function searchLE(arr, x) { // last index with arr[i] <= x (-1: none)
    let a = 0, b = arr.length;
    while (a < b) { const m = (a + b) >> 1; if (arr[m] <= x) a = m + 1; else b = m; }
    return a - 1;
  }
  function interp(xs, ys, x) { // linear, extrapolated by the ends' slope
    const n = xs.length;
    if (!n) return NaN;
    if (n === 1) return ys[0];
    let i = searchLE(xs, x);
    i = Math.max(0, Math.min(n - 2, i));
    const dx = xs[i + 1] - xs[i];
    return dx ? ys[i] + (x - xs[i]) * (ys[i + 1] - ys[i]) / dx : ys[i];
  }
  function guideOf(run) {
    const g = D.guides[String(run)];
    if (g === undefined || series[g].missing) return null;
    if (!series[g].guide) {
      const L = series[g].levels[0], xs = [], ys = [];
      for (let i = 0; i < L.n; i++) if (isFinite(L.last[i])) { xs.push(L.hi[i]); ys.push(L.last[i]); }
      series[g].guide = { xs: Float64Array.from(xs), ys: Float64Array.from(ys) };
    }
    return series[g].guide;
  }
  // x of a step of series s (walls: by its finest columns' (last step, wall) knots).
  function xFun(s) {
    const mode = view.xmode;
    if (mode === "step") return (st) => st;
    if (mode === "tokens") {
      const g = guideOf(s.run);
      return g ? (st) => interp(g.xs, g.ys, st) : null;
    }
    const L = s.levels[0];
    const base = mode === "wall" ? s.wall0 / DAY : 0, scale = mode === "wall" ? 1 / DAY : 1 / HOUR;
    const rel = mode === "relative" ? (s.wall0 - runs[s.run].created) : 0;
    return (st) => base + (interp(L.hi, L.wall, st) + rel) * scale;
  }

  // ---- what a chart draws ----------------------------------------------------------------
  function visible(L, fx, x0, x1) { // [a, b) columns overlapping [x0, x1], one more each side
    // x rises with the step in every mode (walls and tokens grow), so search on the steps.
    let a = 0, b = L.n;
    if (x0 !== -Infinity) { let lo = 0, hi = L.n; while (lo < hi) { const m = (lo + hi) >> 1; if (fx(L.hi[m]) < x0) lo = m + 1; else hi = m; } a = lo; }
    if (x1 !== Infinity) { let lo = a, hi = L.n; while (lo < hi) { const m = (lo + hi) >> 1; if (fx(L.lo[m]) <= x1) lo = m + 1; else hi = m; } b = lo; }
    return [a, b];
  }

  function pickLevel(s, fx, x0, x1, px) {
    // The coarsest columns with at least one a pixel of the part of the chart the series
    // covers; the finest when none has (then, unless they are raw points, the chart is coarser
    // than its pixels and says so).
    const B = s.levels[0];
    const c0 = Math.max(x0, fx(B.lo[0])), c1 = Math.min(x1, fx(B.hi[B.n - 1]));
    const need = Math.max(1, Math.floor((c1 - c0) / (x1 - x0) * px));
    for (let k = s.levels.length - 1; k >= 0; k--) {
      const L = s.levels[k], [a, b] = visible(L, fx, x0, x1);
      if (b - a >= need || k === 0) return { L, a, b, coarse: k === 0 && !L.raw && b - a < need };
    }
  }

  function emaOf(s, L) { // debiased EMA in steps over a level's means, cached per weight
    const w = view.smoothing, key = "ema" + w;
    if (L[key]) return L[key];
    const out = new Float64Array(L.n);
    let acc = 0, tot = 0, prev = NaN;
    for (let i = 0; i < L.n; i++) {
      const at = (L.lo[i] + L.hi[i]) / 2, y = L.mean[i];
      if (!isFinite(y)) { out[i] = NaN; continue; }
      const a = prev !== prev ? 0 : Math.pow(w, (at - prev) / s.unit);
      acc = acc * a + (1 - a) * y; tot = tot * a + (1 - a); prev = at;
      out[i] = acc / tot;
    }
    L[key] = out;
    return out;
  }

  function buildPath(s, item, chart) {
    const fx = xFun(s);
    if (!fx) return null;
    const { x0, x1, px } = chart.frame;
    const P = pickLevel(s, fx, x0, x1, px), L = P.L;
    const a = Math.max(0, P.a - 1), b = Math.min(L.n, P.b + 1);
    const xs = [], ys = [];
    for (let i = a; i < b; i++) {
      if (L.raw) { xs.push(fx(L.lo[i])); ys.push(L.last[i]); continue; }
      const has = isFinite(L.mn[i]);
      if (has) {
        const minFirst = L.mnAt[i] <= L.mxAt[i], one = L.mnAt[i] === L.mxAt[i];
        const s1 = minFirst ? L.mnAt[i] : L.mxAt[i], v1 = minFirst ? L.mn[i] : L.mx[i];
        const s2 = minFirst ? L.mxAt[i] : L.mnAt[i], v2 = minFirst ? L.mx[i] : L.mn[i];
        xs.push(fx(s1)); ys.push(v1);
        if (!one) { xs.push(fx(s2)); ys.push(v2); }
        if (isFinite(L.last[i]) && L.hi[i] > s2) { xs.push(fx(s2)); ys.push(L.last[i]); xs.push(fx(L.hi[i])); ys.push(L.last[i]); }
      } else { xs.push(fx(L.hi[i])); ys.push(L.last[i]); }
    }
    let smooth = null;
    if (view.smoothing > 0 && item.smooth && s.smooth) {
      const e = emaOf(s, L), sx = [], sy = [];
      for (let i = a; i < b; i++) { sx.push(fx((L.lo[i] + L.hi[i]) / 2)); sy.push(e[i]); }
      smooth = { xs: sx, ys: sy };
    }
    const bad = [];
    for (let i = a; i < b; i++) if (L.bad[i]) bad.push([fx(L.hi[i]), L.bad[i]]);
    return { xs, ys, smooth, level: L, coarse: P.coarse, a: P.a, b: P.b, bad, count: P.b - P.a };
  }

  // ---- ticks -----------------------------------------------------------------------------
  function niceTicks(lo, hi, n) {
    const span = hi - lo;
    if (!(span > 0)) return [lo];
    const raw = span / n, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map((f) => f * mag).find((s) => s >= raw) || 10 * mag;
    const out = [];
    for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) out.push(Math.abs(t) < step * 1e-9 ? 0 : t);
    return out;
  }
  // Wall-time ticks (x in days since 1970, labelled in the browser's time zone, as the
  // window labels its own): on whole seconds, minutes, hours or days of local time
  // (niceTicks' decimal steps of a day put them at 22:48, 00:00, 01:12, 02:23).
  const TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800,
    21600, 43200, 86400, 172800, 604800, 1209600];
  function timeTicks(lo, hi, n) {
    const raw = (hi - lo) * DAY / n;
    const sec = TIME_STEPS.find((s) => s >= raw);
    if (sec === undefined) return niceTicks(lo, hi, n);  // months and more: days, decimally
    const zone = -new Date(lo * DAY * 1000).getTimezoneOffset() * 60;  // seconds east of UTC
    const out = [];
    for (let k = Math.ceil((lo * DAY + zone) / sec - 1e-9); ; k++) {
      const t = (k * sec - zone) / DAY;
      if (t > hi + (sec / DAY) * 1e-9) break;
      out.push(t);
    }
    return out;
  }
  // A chart's x ticks and their labels: about one each 90 pixels, a time's ("11-15 02:00")
  // each 80 (its steps go 1, 2, 3, 6 hours: at 90 a 5.6-hour span got 2-hour ticks).
  function xTickLabels(f) {
    if (view.xmode === "wall") {
      const xt = timeTicks(f.x0, f.x1, Math.max(2, f.px / 80));
      const spacing = xt.length > 1 ? xt[1] - xt[0] : Math.abs(xt[0]) || 1;
      return xt.map((t) => [t, wallLabel(t, spacing)]);
    }
    const xt = niceTicks(f.x0, f.x1, Math.max(2, Math.floor(f.px / 90)));
    const unit = view.xmode === "relative" ? "h" : "";
    const labels = compactLabels(xt);
    return xt.map((t, k) => [t, labels[k] + unit]);
  }
  // A chart's y ticks in view and their labels.
  function yTickLabels(f) {
    const values = (f.log ? logTicks(f.y0, f.y1).map((t) => Math.pow(10, t)) : niceTicks(f.y0, f.y1, 5))
      .filter((v) => { const y = Y(f, v); return y >= PAD.t - 1 && y <= PAD.t + f.py + 1; });
    const labels = compactLabels(values);
    return values.map((v, k) => [v, labels[k]]);
  }
  // Numbers as the window writes them (resplot/data/numbers.py, resplot/draw/ticks.py): SI
  // suffixes from 10^4 up (`12.5k`, `1.5M`, `6.342G`), powers of ten below 10^-3 on ticks
  // (`3e-4`), plain decimals between; the report wrote `430000`, `6.00e-4` and `6B` beside
  // the window's `430k`, `6e-4` and `6G`.
  const SI = { 3: "k", 6: "M", 9: "G", 12: "T", 15: "P" };
  const MAX_DECIMALS = 6;
  function siPower(top) { return Math.min(15, 3 * Math.floor(Math.log10(top) / 3)); }
  function strip(text) { return text.includes(".") ? text.replace(/0+$/, "").replace(/\.$/, "") : text; }
  // `v` with `n` digits after the point (`exponential`: after the first digit), rounded as
  // Python rounds: a value exactly halfway between two goes to the even one (toFixed and
  // toExponential go away from zero: 0.125 to "0.13" where Python writes "0.12").
  function pyRound(v, n, exponential) {
    const js = exponential ? v.toExponential(n) : v.toFixed(n);
    const long = exponential ? v.toExponential(Math.min(100, n + 30)) : v.toFixed(Math.min(100, n + 30));
    const [digits, exp] = long.split("e");
    const at = digits.indexOf(".") + n + 1;  // the first digit dropped
    if (digits[at] !== "5" || !/^0*$/.test(digits.slice(at + 1))) return js;
    const kept = digits.slice(0, n ? at : at - 1);
    if (Number(kept[kept.length - 1]) % 2) return js;  // away from zero is to even here
    return exp === undefined ? kept : `${kept}e${exp}`;
  }
  // Python's `{v:.{p}g}`: p significant digits, trailing zeros dropped, an exponent of at
  // least two digits where the value is below 10^-4 or has more than p digits before the point.
  function formatG(v, p) {
    if (!isFinite(v)) return Number.isNaN(v) ? "nan" : v > 0 ? "inf" : "-inf";
    if (v === 0) return "0";
    const [mantissa, exp] = pyRound(v, p - 1, true).split("e");
    const e = Number(exp);
    if (e < -4 || e >= p) {
      const digits = String(Math.abs(e)).padStart(2, "0");
      return `${strip(mantissa)}e${e < 0 ? "-" : "+"}${digits}`;
    }
    return strip(pyRound(v, Math.max(0, p - 1 - e), false));
  }
  // A value alone (the readout's x): four significant digits, an SI suffix from 10^4 up.
  function shortValue(v) {
    if (!isFinite(v)) return formatG(v, 4);
    const top = Number(formatG(Math.abs(v), 4));  // as rounded: 999,960 is 1M, 9,999.6 is 10k
    if (top < 1e4) return formatG(v, 4);
    const power = siPower(top);
    return formatG(v / Number(`1e${power}`), 4) + SI[power];
  }
  function smallestGap(values) {
    const vals = [...new Set(values)].sort((a, b) => a - b);
    let gap = Infinity;
    for (let i = 1; i < vals.length; i++) if (vals[i] > vals[i - 1]) gap = Math.min(gap, vals[i] - vals[i - 1]);
    return gap === Infinity ? 0 : gap;
  }
  // The fewest decimals that tell the values apart (each within a tenth of the smallest gap).
  function fewestDecimals(values) {
    const vals = [...new Set(values)].sort((a, b) => a - b), gap = smallestGap(vals);
    for (let d = 0; d <= MAX_DECIMALS; d++) {
      const texts = vals.map((v) => pyRound(v, d, false));
      const close = vals.every((v, k) => Math.abs(Number(texts[k]) - v) <= gap / 10);
      if (new Set(texts).size === vals.length && (gap === 0 || close)) return d;
    }
    return MAX_DECIMALS;
  }
  // Tick labels in one style for all of a chart's ticks (ticks.py's compact_labels).
  function compactLabels(values) {
    const finite = values.filter(isFinite);
    if (!finite.length) return values.map(() => "");
    const top = Math.max(...finite.map(Math.abs));
    if (top >= 1e4) {
      const power = siPower(top), unit = Number(`1e${power}`);
      const d = fewestDecimals(finite.map((v) => v / unit));
      return values.map((v) => (isFinite(v) && v ? strip(pyRound(v / unit, d, false)) + SI[power] : "0"));
    }
    if (top < 1e-3) {
      const parts = values.map((v) => {
        if (!isFinite(v) || !v) return null;
        const e = Math.floor(Math.log10(Math.abs(v)));
        return [v / Number(`1e${e}`), e];  // (V8's 10 ** -4 is not the double nearest 1e-4)
      });
      // As few mantissa digits as keep them apart, each within a tenth of the smallest gap.
      const gap = smallestGap(finite);
      let out = [];
      for (let digits = 0; digits <= MAX_DECIMALS; digits++) {
        out = parts.map((p) => (p === null ? "0" : `${strip(pyRound(p[0], digits, false))}e${p[1]}`));
        const close = values.every((v, k) => !isFinite(v) || Math.abs(Number(out[k]) - v) <= gap / 10);
        if (new Set(out).size === new Set(values).size && (gap === 0 || close)) break;
      }
      return out;
    }
    if (new Set(finite).size === 1) return values.map((v) => (isFinite(v) ? formatG(v, 4) : ""));
    const d = fewestDecimals(finite);
    return values.map((v) => (isFinite(v) ? pyRound(v, d, false) : ""));
  }
  // An x value as the readout's header (the ticks: xTickLabels).
  function fmtX(v) {
    const m = view.xmode;
    if (m === "wall") return wallLabel(v, undefined);
    return shortValue(v) + (m === "relative" ? "h" : "");
  }
  // A wall time (days since 1970) in the browser's zone, to the second where the ticks are
  // under a minute apart (`spacing`, in days).
  function wallLabel(v, spacing) {
    // To the second: a tick k × 1 h in days is 00:59:59.999 in floating point.
    const d = new Date(Math.round(v * DAY) * 1000), two = (n) => String(n).padStart(2, "0");
    const hm = `${two(d.getHours())}:${two(d.getMinutes())}`;
    return spacing !== undefined && spacing * DAY < 60 ? `${hm}:${two(d.getSeconds())}`
      : `${two(d.getMonth() + 1)}-${two(d.getDate())} ${hm}`;
  }

  // ---- charts ----------------------------------------------------------------------------
  const charts = [];
  const PAD = { l: 56, r: 10, t: 8, b: 22 };

  function makeChart(panel, host) {
    const div = document.createElement("div");
    div.className = "chart";
    const h = document.createElement("h3");
    h.textContent = panel.title + (panel.stacked ? " (parts drawn as lines)" : "");
    const box = document.createElement("div");
    box.className = "box";
    const canvas = document.createElement("canvas"), top = document.createElement("canvas");
    canvas.className = "plot"; top.className = "overlay";
    box.append(canvas, top);
    div.append(h, box);
    host.append(div);
    // The data layer is painted when the data, range or size change; the crosshair and the
    // zoom selection on a layer of their own (uPlot's cursor layer): a hover repaints nothing.
    const chart = { panel, div, canvas, top, frame: null, paths: [], drag: null, stale: true };
    div.chart = chart;
    watcher.observe(div);
    top.addEventListener("mousemove", (e) => onMove(chart, e));
    top.addEventListener("mouseleave", () => { view.hover = null; hideTip(); drawAll(true); });
    top.addEventListener("mousedown", (e) => { chart.drag = { x: e.offsetX, shift: e.shiftKey, range: currentRange() }; e.preventDefault(); });
    top.addEventListener("mouseup", (e) => onUp(chart, e));
    top.addEventListener("dblclick", () => { view.range = null; drawAll(); });
    top.addEventListener("wheel", (e) => onWheel(chart, e), { passive: false });
    return chart;
  }

  function fullRange() {
    let lo = Infinity, hi = -Infinity;
    for (const c of activeCharts()) for (const it of c.panel.items) {
      const s = series[it.s];
      if (s.missing || !runs[s.run].on) continue;
      if (view.xmode === "step") { lo = Math.min(lo, s.lo); hi = Math.max(hi, s.hi); continue; }
      const fx = xFun(s), L = s.levels[0];
      if (!fx || !L.n) continue;
      lo = Math.min(lo, fx(L.lo[0])); hi = Math.max(hi, fx(L.hi[L.n - 1]));
    }
    if (!(hi > lo)) { hi = (isFinite(lo) ? lo : 0) + 1; lo = hi - 2; }
    return [lo, hi];
  }
  function currentRange() { return view.range || fullRange(); }
  function activeCharts() { return charts.filter((c) => c.page === view.page); }

  function drawChart(chart, overlayOnly) {
    const cv = chart.canvas, dpr = window.devicePixelRatio || 1;
    const W = cv.clientWidth, H = cv.clientHeight;
    if (!W) return;
    if (cv.width !== Math.round(W * dpr)) {
      for (const c of [cv, chart.top]) { c.width = Math.round(W * dpr); c.height = Math.round(H * dpr); }
      overlayOnly = false;
    }
    const [x0, x1] = currentRange();
    const px = W - PAD.l - PAD.r, py = H - PAD.t - PAD.b;
    if (!overlayOnly || !chart.frame) {
      chart.frame = { x0, x1, px, py, W, H };
      chart.paths = chart.panel.items.map((it) => {
        const s = series[it.s];
        return s.missing || !runs[s.run].on ? null : buildPath(s, it, chart);
      });
      // y range: every drawn value in view (extremes included: a spike sets the range)
      let lo = Infinity, hi = -Infinity;
      const log = chart.panel.log && view.logy;
      for (const p of chart.paths) if (p) {
        for (let i = 0; i < p.xs.length; i++) {
          const x = p.xs[i], y = p.ys[i];
          if (x < x0 || x > x1 || !isFinite(y) || (log && y <= 0)) continue;
          if (y < lo) lo = y; if (y > hi) hi = y;
        }
        // A segment across an edge of the view, where it crosses it: a sparse series zoomed
        // between two of its points has no value inside, and its segment was off the chart.
        for (const e of [x0, x1]) {
          const y = crossing(p.xs, p.ys, e);
          if (!isFinite(y) || (log && y <= 0)) continue;
          if (y < lo) lo = y; if (y > hi) hi = y;
        }
      }
      if (!(hi >= lo)) { lo = log ? 0.1 : 0; hi = log ? 10 : 1; }
      if (log) { lo = Math.log10(lo); hi = Math.log10(hi); }
      const m = (hi - lo) * 0.05 || (Math.abs(hi) * 0.05 || 1);
      chart.frame.log = log; chart.frame.y0 = lo - m; chart.frame.y1 = hi + m;
      chart.coarse = chart.paths.filter((p) => p && p.coarse);
      chart.div.dataset.coarse = chart.coarse.length ? "1" : "0";
      paint(chart, dpr);
    }
    paintTop(chart, dpr);
  }

  // The value at x = e of the segment between the points either side of it (NaN: none there,
  // or one of them not finite, which breaks the line).
  function crossing(xs, ys, e) {
    let a = 0, b = xs.length;
    while (a < b) { const m = (a + b) >> 1; if (xs[m] > e) b = m; else a = m + 1; }
    if (a === 0 || a === xs.length || !(xs[a - 1] < e)) return NaN;
    const y0 = ys[a - 1], y1 = ys[a];
    if (!isFinite(y0) || !isFinite(y1)) return NaN;
    return y0 + (y1 - y0) * (e - xs[a - 1]) / (xs[a] - xs[a - 1]);
  }

  function X(f, x) { return PAD.l + (x - f.x0) / (f.x1 - f.x0) * f.px; }
  function Y(f, y) { const v = f.log ? Math.log10(y) : y; return PAD.t + (1 - (v - f.y0) / (f.y1 - f.y0)) * f.py; }

  // First, min, max and last of each pixel column, in order: the polyline drawn (M4).
  function m4(f, xs, ys) {
    const out = [], n = xs.length, PX = new Float64Array(n), PY = new Float64Array(n);
    let c = NaN, fI = -1, nI = -1, xI = -1, lI = -1, gap = true;
    const flush = () => {
      if (fI < 0) return;
      // first <= min, max <= last by construction: only the extremes' order is open
      const m1 = nI < xI ? nI : xI, m2 = nI < xI ? xI : nI;
      out.push(PX[fI], PY[fI], gap ? 1 : 0);
      if (m1 !== fI) out.push(PX[m1], PY[m1], 0);
      if (m2 !== m1) out.push(PX[m2], PY[m2], 0);
      if (lI !== m2) out.push(PX[lI], PY[lI], 0);
      gap = false;
      fI = -1;
    };
    for (let i = 0; i < n; i++) {
      const y = ys[i];
      if (!isFinite(y) || (f.log && y <= 0)) { flush(); c = NaN; gap = true; continue; }
      PX[i] = X(f, xs[i]); PY[i] = Y(f, y);
      const col = Math.floor(PX[i]);
      if (col !== c) { flush(); c = col; fI = nI = xI = lI = i; }
      else { if (PY[i] > PY[nI]) nI = i; if (PY[i] < PY[xI]) xI = i; lI = i; }
    }
    flush();
    return out;
  }

  function stroke(ctx, pts) {
    ctx.beginPath();
    const lone = []; // points no segment reaches (a series' only one, one between gaps): dots
    for (let i = 0; i < pts.length; i += 3) {
      if (pts[i + 2]) {
        ctx.moveTo(pts[i], pts[i + 1]);
        if (i + 3 >= pts.length || pts[i + 5]) lone.push(pts[i], pts[i + 1]);
      } else ctx.lineTo(pts[i], pts[i + 1]);
    }
    ctx.stroke();
    if (!lone.length) return;
    ctx.beginPath();
    for (let i = 0; i < lone.length; i += 2) {
      ctx.moveTo(lone[i] + 2, lone[i + 1]); ctx.arc(lone[i], lone[i + 1], 2, 0, 2 * Math.PI);
    }
    ctx.fill(); // (the caller's fillStyle: the series' colour)
  }

  function paint(chart, dpr) {
    const f = chart.frame, ctx = chart.canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, f.W, f.H);
    ctx.font = "11px system-ui, sans-serif";
    ctx.strokeStyle = "#e6e6e6"; ctx.fillStyle = "#555"; ctx.lineWidth = 1;
    // grid and ticks
    ctx.textAlign = "right"; ctx.textBaseline = "middle";
    for (const [v, label] of yTickLabels(f)) {
      const y = Y(f, v);
      ctx.beginPath(); ctx.moveTo(PAD.l, y); ctx.lineTo(PAD.l + f.px, y); ctx.stroke();
      ctx.fillText(label, PAD.l - 4, y);
    }
    ctx.textAlign = "center"; ctx.textBaseline = "top";
    for (const [t, label] of xTickLabels(f)) {
      const x = X(f, t);
      ctx.beginPath(); ctx.moveTo(x, PAD.t); ctx.lineTo(x, PAD.t + f.py); ctx.stroke();
      const half = ctx.measureText(label).width / 2;
      ctx.fillText(label, Math.min(Math.max(x, half), f.W - half - 1), PAD.t + f.py + 4);
    }
    ctx.strokeStyle = "#999"; ctx.strokeRect(PAD.l, PAD.t, f.px, f.py);
    ctx.save();
    ctx.beginPath(); ctx.rect(PAD.l, PAD.t, f.px, f.py); ctx.clip();
    // events and alerts: a tick at the top of every chart
    for (const e of D.events) {
      if (!runs[e.run].on) continue;
      const x = eventX(e);
      if (x === null || x < f.x0 || x > f.x1) continue;
      const xp = X(f, x);
      ctx.fillStyle = e.level === "error" ? "#c00" : e.level === "warning" ? "#d97500" : "#888";
      ctx.beginPath(); ctx.moveTo(xp - 4, PAD.t); ctx.lineTo(xp + 4, PAD.t); ctx.lineTo(xp, PAD.t + 7); ctx.fill();
      ctx.strokeStyle = ctx.fillStyle; ctx.globalAlpha = 0.25;
      ctx.beginPath(); ctx.moveTo(xp, PAD.t); ctx.lineTo(xp, PAD.t + f.py); ctx.stroke(); ctx.globalAlpha = 1;
    }
    chart.paths.forEach((p, k) => {
      if (!p) return;
      const it = chart.panel.items[k];
      ctx.strokeStyle = it.color; ctx.fillStyle = it.color;
      ctx.setLineDash(it.dash ? [5, 3] : []);
      // 1 px for the faint logged line under a smoothed one: software canvases draw
      // hairlines on a fast path
      ctx.lineWidth = p.smooth ? 1 : 1.25; ctx.globalAlpha = p.smooth ? 0.28 : 1;
      p.line = m4(f, p.xs, p.ys);
      stroke(ctx, p.line);
      if (it.marker && p.level.raw && p.xs.length < f.px / 3) for (let i = 0; i < p.xs.length; i++) {
        if (!isFinite(p.ys[i])) continue;
        ctx.beginPath(); ctx.arc(X(f, p.xs[i]), Y(f, p.ys[i]), 2.5, 0, 7); ctx.fill();
      }
      ctx.globalAlpha = 1;
      if (p.smooth) { ctx.lineWidth = 1.5; stroke(ctx, m4(f, p.smooth.xs, p.smooth.ys)); }
      ctx.setLineDash([]);
      for (const [x, kind] of p.bad) { // NaN / inf: a mark at the bottom, never hidden
        const xp = X(f, x);
        ctx.fillStyle = kind & 1 ? "#c00" : "#d97500";
        ctx.fillRect(xp - 1.5, PAD.t + f.py - 6, 3, 6);
      }
    });
    ctx.restore();
    if (chart.coarse.length) { // said on the chart: this zoom is past the embedded columns
      const w = Math.max(...chart.coarse.map((p) => p.level.width));
      ctx.fillStyle = "#b35900"; ctx.textAlign = "right"; ctx.textBaseline = "top";
      ctx.fillText(`coarser than its pixels: ${w}-step columns (the file's finest)`, PAD.l + f.px - 4, PAD.t + 10);
    }
  }

  function paintTop(chart, dpr) {
    const f = chart.frame, ctx = chart.top.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, f.W, f.H);
    if (view.hover !== null && view.hover >= f.x0 && view.hover <= f.x1) {
      ctx.strokeStyle = "#444"; ctx.lineWidth = 0.8; ctx.setLineDash([3, 3]);
      const xp = X(f, view.hover);
      ctx.beginPath(); ctx.moveTo(xp, PAD.t); ctx.lineTo(xp, PAD.t + f.py); ctx.stroke(); ctx.setLineDash([]);
    }
    if (chart.drag && chart.drag.now !== undefined && !chart.drag.shift) {
      ctx.fillStyle = "rgba(60,120,220,0.15)";
      const a = Math.min(chart.drag.x, chart.drag.now), b = Math.max(chart.drag.x, chart.drag.now);
      ctx.fillRect(a, PAD.t, b - a, f.py);
    }
  }

  function logTicks(a, b) { // in log10 units: decades (every k-th over many), or 1-2-5
    const out = [];
    if (b - a > 3) {
      const k = Math.ceil((b - a) / 5);
      for (let e = Math.ceil(a / k) * k; e <= b; e += k) out.push(e);
      return out;
    }
    const steps = b - a > 1 ? [0, Math.log10(2), Math.log10(5)] : [0, Math.log10(2), Math.log10(3), Math.log10(5), Math.log10(7)];
    for (let e = Math.floor(a); e <= Math.ceil(b); e++) for (const s of steps) if (e + s >= a && e + s <= b) out.push(e + s);
    return out.length >= 2 ? out : niceTicks(Math.pow(10, a), Math.pow(10, b), 4).filter((v) => v > 0).map(Math.log10);
  }

  function eventX(e) {
    const run = runs[e.run];
    if (view.xmode === "wall" || view.xmode === "relative") {
      if (e.wall === null) return null;
      return view.xmode === "wall" ? e.wall / DAY : (e.wall - run.created) / HOUR;
    }
    if (e.step === null) return null;
    if (view.xmode === "tokens") { const g = guideOf(e.run); return g ? interp(g.xs, g.ys, e.step) : null; }
    return e.step;
  }

  // ---- hover -----------------------------------------------------------------------------
  function xOfPixel(chart, ox) { const f = chart.frame; return f.x0 + (ox - PAD.l) / f.px * (f.x1 - f.x0); }

  // What series s logged nearest to x: the point (raw), or the column holding x (its extremes
  // and last: which step inside it is not in the file).
  function readAt(s, x) {
    const fx = xFun(s);
    if (!fx) return null;
    const L = s.levels[0];
    if (!L.n) return null;
    let lo = 0, hi = L.n; // first column whose last step's x >= x
    while (lo < hi) { const m = (lo + hi) >> 1; if (fx(L.hi[m]) < x) lo = m + 1; else hi = m; }
    let i = Math.min(lo, L.n - 1);
    if (i > 0 && Math.abs(fx(L.hi[i - 1]) - x) <= Math.abs(fx(L.lo[i]) - x)) i -= 1;
    if (L.raw) { // several points at one step: the newest, as the line ends there
      while (i + 1 < L.n && L.lo[i + 1] === L.lo[i]) i++;
      return { raw: true, step: L.lo[i], value: L.last[i] };
    }
    return { raw: false, lo: L.lo[i], hi: L.hi[i], min: L.mn[i], max: L.mx[i], last: L.last[i] };
  }

  function onMove(chart, e) {
    if (chart.drag) { dragTo(chart, e); return; }
    if (!chart.frame) return;
    const x = xOfPixel(chart, e.offsetX);
    view.hover = x;
    drawAll(true);
    const rows = [];
    chart.panel.items.forEach((it) => {
      const s = series[it.s];
      if (s.missing || !runs[s.run].on) return;
      const r = readAt(s, x);
      if (r) rows.push({ it, r });
    });
    rows.sort((p, q) => (q.r.raw ? q.r.value : q.r.last) - (p.r.raw ? p.r.value : p.r.last) || 0);
    const tip = $("tip");
    tip.textContent = "";
    const head = document.createElement("div");
    head.className = "head";
    head.textContent = `${chart.panel.title} · ${view.xmode} ${fmtX(x)}`;
    const table = document.createElement("table");
    for (const { it, r } of rows) {
      const tr = table.insertRow();
      tr.className = "row";
      tr.dataset.label = it.label;
      const sw = document.createElement("span");
      sw.className = "sw"; sw.style.background = it.color;
      const name = tr.insertCell(); name.append(sw, document.createTextNode(it.label));
      const val = tr.insertCell(); val.className = "v";
      const at = tr.insertCell();
      if (r.raw) {
        tr.dataset.value = String(r.value); tr.dataset.step = String(r.step);
        val.textContent = fmtFull(r.value); at.textContent = "step " + r.step;
      } else {
        tr.dataset.min = String(r.min); tr.dataset.max = String(r.max);
        val.textContent = `${fmtFull(r.min)} … ${fmtFull(r.max)}, last ${fmtFull(r.last)}`;
        at.textContent = `steps ${r.lo}–${r.hi}`;
      }
    }
    tip.append(head, table);
    for (const ev of D.events) {
      if (!runs[ev.run].on) continue;
      const ex = eventX(ev);
      if (ex === null || Math.abs(X(chart.frame, ex) - e.offsetX) > 4) continue;
      const d = document.createElement("div");
      d.className = "ev";
      d.textContent = `${runs[ev.run].name} · ${ev.kind}${ev.step !== null ? " @ step " + ev.step : ""}: ${ev.title}`;
      tip.append(d);
    }
    tip.hidden = false;
    const bx = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 4);
    tip.style.left = bx + "px";
    tip.style.top = Math.min(e.clientY + 14, window.innerHeight - tip.offsetHeight - 4) + "px";
  }
  function fmtFull(v) { return isFinite(v) ? String(+v.toPrecision(6)) : String(v); }
  function hideTip() { $("tip").hidden = true; }

  // ---- zoom and pan ----------------------------------------------------------------------
  function dragTo(chart, e) {
    const d = chart.drag;
    d.now = e.offsetX;
    if (d.shift) {
      const f = chart.frame, [a, b] = d.range, dx = (d.x - e.offsetX) / f.px * (b - a);
      view.range = [a + dx, b + dx];
      scheduleDraw();
    } else drawChart(chart, true);
  }
  function onUp(chart, e) {
    const d = chart.drag;
    chart.drag = null;
    if (!d || d.shift) return;
    if (Math.abs(e.offsetX - d.x) > 4) {
      const a = xOfPixel(chart, Math.min(d.x, e.offsetX)), b = xOfPixel(chart, Math.max(d.x, e.offsetX));
      setRange(a, b);
    } else drawChart(chart, true);
  }
  function onWheel(chart, e) {
    e.preventDefault();
    const [a, b] = currentRange(), x = xOfPixel(chart, e.offsetX), k = e.deltaY > 0 ? 1.25 : 0.8;
    view.range = [x - (x - a) * k, x + (b - x) * k];
    scheduleDraw();
  }
  function setRange(a, b) {
    if (!(b > a)) return;
    view.range = [a, b];
    drawAll();
  }
  window.addEventListener("mouseup", () => { for (const c of charts) if (c.drag) { c.drag = null; drawChart(c, true); } });

  // Charts out of view wait until they scroll in (an IntersectionObserver draws them then):
  // opening a long page draws what the reader sees.
  function inView(c) {
    const r = c.div.getBoundingClientRect();
    return r.bottom > -200 && r.top < window.innerHeight + 200;
  }
  function drawAll(overlayOnly) {
    for (const c of activeCharts()) {
      if (inView(c)) { drawChart(c, overlayOnly && !c.stale); c.stale = false; }
      else if (!overlayOnly) c.stale = true;
    }
  }
  const watcher = new IntersectionObserver((entries) => {
    for (const e of entries) {
      const c = e.target.chart;
      if (e.isIntersecting && c.stale && c.page === view.page) { c.stale = false; drawChart(c); }
    }
  }, { rootMargin: "200px" });
  // Wheel, pan and resize come faster than frames: one redraw a frame (coalesced).
  let pending = 0;
  function scheduleDraw() {
    if (!pending) pending = requestAnimationFrame(() => { pending = 0; drawAll(); });
  }
  window.addEventListener("resize", scheduleDraw);

  // ---- page ------------------------------------------------------------------------------
  function toggleRun(i) {
    runs[i].on = !runs[i].on;
    document.querySelectorAll(`[data-run="${i}"]`).forEach((el) => el.classList.toggle("off", !runs[i].on));
    document.querySelectorAll(`input[data-run="${i}"]`).forEach((el) => { el.checked = runs[i].on; });
    drawAll();
  }

  function build() {
    $("title").textContent = D.title;
    $("made").textContent = `${runs.length} runs · made ${D.made} by resplot · columns: ${
      D.budget.width === 1 ? "every point" : D.budget.width + " steps (finest)"}`;
    document.title = D.title;
    for (const n of D.notes) { const p = document.createElement("p"); p.textContent = n; $("notes").append(p); }
    const tabs = $("tabs"), pages = $("pages");
    D.pages.forEach((pg, k) => {
      const b = document.createElement("button");
      b.type = "button"; b.textContent = pg.name[0].toUpperCase() + pg.name.slice(1);
      b.addEventListener("click", () => showPage(k));
      tabs.append(b);
      const host = document.createElement("section");
      host.className = "grid"; host.dataset.page = pg.name;
      pages.append(host);
      if (pg.name === "ranks") {
        const div = document.createElement("div");
        div.className = "ranks";
        if (pg.img) { const img = document.createElement("img"); img.src = pg.img; img.alt = "Ranks page"; div.append(img); }
        else div.textContent = pg.why;
        host.append(div);
        return;
      }
      if (!pg.panels.length) host.textContent = `The ${pg.name} page found none of its series in these runs.`;
      for (const panel of pg.panels) { const c = makeChart(panel, host); c.page = k; charts.push(c); }
    });
    const legend = $("legend");
    runs.forEach((r, i) => {
      const sp = document.createElement("span");
      sp.dataset.run = i; sp.title = `${r.name} (${r.status}) — click to hide or show`;
      const sw = document.createElement("span");
      sw.className = "sw"; sw.style.background = r.color;
      sp.append(sw, document.createTextNode(r.name));
      sp.addEventListener("click", () => toggleRun(i));
      legend.append(sp);
    });
    buildTable();
    $("md").textContent = D.table.md;
    $("xmode").addEventListener("change", (e) => { view.xmode = e.target.value; view.range = null; drawAll(); });
    const sm = $("smooth");
    sm.addEventListener("input", () => { view.smoothing = +sm.value; $("smooth-out").textContent = sm.value; drawAll(); });
    $("logy").addEventListener("change", (e) => { view.logy = e.target.checked; drawAll(); });
    $("reset").addEventListener("click", () => { view.range = null; drawAll(); });
    showPage(0);
  }

  function buildTable() {
    const t = $("runs"), head = t.createTHead().insertRow();
    const cols = ["", "status", "duration", "alerts", ...D.table.header];
    for (const c of cols) { const th = document.createElement("th"); th.textContent = c; head.append(th); }
    const body = t.createTBody();
    runs.forEach((r, i) => {
      const tr = body.insertRow();
      tr.dataset.run = i; tr.className = "run";
      const cb = document.createElement("input");
      cb.type = "checkbox"; cb.checked = true; cb.dataset.run = i;
      cb.addEventListener("change", () => toggleRun(i));
      const sw = document.createElement("span");
      sw.className = "sw"; sw.style.background = r.color;
      tr.insertCell().append(cb, sw);
      tr.insertCell().textContent = r.status;
      const dur = tr.insertCell(); dur.className = "num"; dur.textContent = duration(r.seconds);
      const al = tr.insertCell(); al.className = "alerts"; al.textContent = r.alerts.join("; ");
      (D.table.rows[i] || []).forEach((v, k) => {
        const td = tr.insertCell(); td.textContent = v;
        if (k > 0 && v !== "" && !isNaN(+v)) td.className = "num";
      });
    });
  }
  function duration(s) {
    if (s < 60) return s.toFixed(0) + " s";
    if (s < HOUR) return (s / 60).toFixed(1) + " min";
    if (s < DAY) return (s / HOUR).toFixed(2) + " h";
    return (s / DAY).toFixed(2) + " d";
  }

  function showPage(k) {
    view.page = k;
    document.querySelectorAll("#tabs button").forEach((b, i) => b.classList.toggle("on", i === k));
    document.querySelectorAll("#pages > section").forEach((s, i) => { s.hidden = i !== k; });
    view.range = null;
    drawAll();
  }

  // The columns a chart drew in view (with the extremes, in steps).
  function columnsOf(L, a, b) {
    const out = [];
    for (let i = a; i < b; i++) if (isFinite(L.mn[i])) out.push([L.lo[i], L.hi[i], L.mn[i], L.mx[i], L.mnAt[i], L.mxAt[i]]);
    return out;
  }

  // For tests and scripts: the page's state and what each chart drew.
  window.resplotReport = {
    data: D, runs, get series() { return series; }, charts, view, setRange, drawAll, toggleRun, showPage,
    pixelOf(chartIndex, x) { const c = charts[chartIndex]; return X(c.frame, x); },
    xLabels(chartIndex) { return xTickLabels(charts[chartIndex].frame); },
    yLabels(chartIndex) { return yTickLabels(charts[chartIndex].frame); },
    compactLabels, shortValue,
    drawn(chartIndex) {
      const c = charts[chartIndex];
      return c.paths.map((p, k) => p && { label: c.panel.items[k].label, key: series[c.panel.items[k].s].key,
        width: p.level.width, raw: p.level.raw, coarse: p.coarse, count: p.count,
        columns: p.level.raw ? [] : columnsOf(p.level, p.a, p.b),
        max: Math.max(...p.ys.filter(isFinite)), min: Math.min(...p.ys.filter(isFinite)) });
    },
  };
  inflate().then((bytes) => {
    BIN = bytes;
    const T2 = performance.now();
    decodeSeries();
    const T3 = performance.now();
    build();
    // Milliseconds from navigation start to every chart drawn (scripts/bench/bench_report.py).
    window.resplotReport.readyAt = performance.now();
    window.resplotReport.timings = { start: T0, parse: T1 - T0, inflate: T2 - T1,
      decode: T3 - T2, draw: window.resplotReport.readyAt - T3 };
    window.resplotReport.ready = true;
    document.body.dataset.ready = "1";
  }, (err) => {
    $("notes").textContent = "This browser cannot open the report's data (it needs " +
      "DecompressionStream: Chrome 80, Firefox 113, Safari 16.4 or newer): " + err;
    throw err;
  });
})();
