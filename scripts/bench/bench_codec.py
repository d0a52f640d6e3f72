"""Points as compressed columns: candidate codecs on the store issue's workload, against the
store as it is today (issue 30, step 1; docs/store.md "Points as compressed columns").

    PYTHONPATH=. .venv/bin/python scripts/bench/bench_codec.py            # the full workload
    PYTHONPATH=. .venv/bin/python scripts/bench/bench_codec.py --steps 20000 --quick

The workload (1 run): 20 training keys every step for --steps steps (0.3 s a step, walls as
time.time() gives them, one wall per log call), values as real loops produce them (float32
losses and norms through .item(), a warmup + cosine lr in float64, throughput and timings from
perf_counter differences, integer-valued counters); and 12 NVML fields x 8 GPUs sampled every
second (integers: utilisation, temperature, clocks, memory, PCIe, throttle flags; power in
watts from milliwatts; an energy counter), each sample at the training step it falls in.

Printed: bytes a point, encode and decode ns a point (stdlib, numpy) for every codec and chunk
size; one step/wall stream per logging group against one per series; Gorilla's bit-packed XOR
and delta-of-delta (pure Python, on a sample: it costs microseconds a point); and the baseline,
measured in the same run: a store written through reslog (the training keys, --baseline-steps
steps), its file bytes a point and `scan()` of one key in ns a point.
"""

from __future__ import annotations

import argparse
import gc
import lzma
import os
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
from logged_keys import GPU_SUFFIXES

from schema.store import chunk_codec as stdlib_codec
from schema.store import chunk_codec_numpy as numpy_codec
from schema.store.chunk_codec import DELTA, DELTA2, SHUFFLE, XOR, shuffle

STEP_S = 0.3
T0_NS = 1_764_000_000_123_456_789
GPUS = 8
# reslog's GPU fields (sys/gpu{i}/...), and three more an NVML sampler of another tracker takes
NVML_FIELDS = (*GPU_SUFFIXES, "mem_util", "pcie_tx_mbs", "pcie_rx_mbs")


def _f32(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32).astype(np.float64)  # loss.item() of a float32 tensor


def training(steps: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, dict]:
    s = np.arange(steps, dtype=np.int64)
    x = s.astype(np.float64)
    dt = STEP_S * np.exp(rng.normal(0, 0.03, steps))  # the step's own time, perf_counter
    dt_ns = np.round(dt * 1e9).astype(np.int64)
    walls = (T0_NS + np.cumsum(dt_ns)) / 1e9  # time.time() at each log call
    t_data = 0.002 * np.exp(rng.normal(0, 0.3, steps))
    t_fwd = dt * 0.31 * np.exp(rng.normal(0, 0.01, steps))
    t_bwd = dt * 0.62 * np.exp(rng.normal(0, 0.01, steps))
    loss = _f32(2.1 + 8.5 * np.exp(-x / 6000.0) + 0.06 * rng.standard_normal(steps))
    warm = np.minimum(1.0, (x + 1) / 2000.0)
    lr = 3e-4 * warm * (0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * x / steps)))
    tokens = 524_288.0
    gn = 0.3 + 2.0 * np.exp(-x / 3000.0)
    alloc = 38_000_000_000 + 512 * rng.integers(0, 4096, steps)
    reserved = np.where(x < 50, 41.0, 44.0) * 2**30
    scale = 65536.0 / 2.0 ** np.minimum(3, (x // 30_000))
    keys = {
        "train/loss": loss,
        "train/ppl": np.exp(loss),
        "train/lr": lr,
        "train/grad_norm": _f32(gn * np.exp(rng.normal(0, 0.15, steps))),
        "grad_norm/attn": _f32(0.6 * gn * np.exp(rng.normal(0, 0.2, steps))),
        "grad_norm/mlp": _f32(0.7 * gn * np.exp(rng.normal(0, 0.2, steps))),
        "grad_norm/embed": _f32(0.1 * gn * np.exp(rng.normal(0, 0.3, steps))),
        "train/param_norm": _f32(180.0 + 0.0004 * x + 0.01 * rng.standard_normal(steps)),
        "train/tokens": (x + 1) * tokens,
        "train/tokens_per_s": tokens / dt,
        "train/mfu": tokens / dt * 6 * 350e6 / 8 / 989e12,
        "train/epoch": (x + 1) * tokens / 9.87e9,
        "train/loss_scale": scale,
        "time/step": dt,
        "time/data": t_data,
        "time/forward": t_fwd,
        "time/backward": t_bwd,
        "time/optimizer": dt - t_fwd - t_bwd - t_data,
        "memory/allocated_gb": alloc / 2**30,
        "memory/reserved_gb": reserved / 2**30,
    }
    return s, walls, keys


def nvml(steps: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, dict]:
    seconds = int(steps * STEP_S)
    wall_ns = T0_NS + np.arange(seconds, dtype=np.int64) * 1_000_000_000
    wall_ns += rng.integers(200_000, 3_000_000, seconds)  # the sampler's wake-up jitter
    walls = wall_ns / 1e9
    s = np.minimum(steps - 1, (wall_ns - T0_NS) // int(STEP_S * 1e9)).astype(np.int64)
    keys = {}
    t = np.arange(seconds, dtype=np.float64)
    for g in range(GPUS):
        busy = rng.random(seconds) > 0.02
        power_mw = np.where(busy, 640_000 + rng.integers(-40_000, 40_000, seconds), 90_000)
        temp = np.round(62 + 8 * (1 - np.exp(-t / 600)) + rng.normal(0, 0.6, seconds))
        clock = np.where(rng.random(seconds) > 0.05, 1980, 1755)
        fields = {
            "util": np.where(busy, rng.integers(96, 101, seconds), rng.integers(0, 20, seconds)),
            "mem_used_gib": (64_000 + rng.integers(0, 64, seconds) * 2) * 2**20 / 2**30,
            "mem_total_gib": np.full(seconds, 81_559 * 2**20 / 2**30),
            "temp_c": temp,
            "power_w": power_mw / 1000.0,  # nvmlDeviceGetPowerUsage is in mW
            "power_limit_w": np.full(seconds, 700.0),
            "fan_pct": np.zeros(seconds),
            "sm_clock_mhz": clock,
            "throttle": np.where(temp > 69, 32, 0),
            "mem_util": np.where(busy, rng.integers(40, 60, seconds), 0),
            "pcie_tx_mbs": rng.integers(20_000, 90_000, seconds) / 1000.0,  # KB/s counters
            "pcie_rx_mbs": rng.integers(10_000, 40_000, seconds) / 1000.0,
        }
        for name in NVML_FIELDS:
            keys[f"sys/gpu{g}/{name}"] = np.asarray(fields[name], dtype=np.float64)
    return s, walls, keys


# -- candidate codecs: each encodes one chunk (steps, walls, *values) to bytes --------------------

Encoder = Callable[..., bytes]


def _plain(compress: Callable[[bytes], bytes], shuffled: bool) -> Encoder:
    def encode(steps, walls, *values) -> bytes:
        cols = [np.asarray(steps, np.int64), np.asarray(walls)] + [np.asarray(v) for v in values]
        parts = [(shuffle(c.tobytes()) if shuffled else c.tobytes()) for c in cols]
        return b"".join(compress(p) for p in parts)

    return encode


def _ours(kinds: tuple, decimal: bool) -> tuple[Encoder, Encoder]:
    def with_numpy(steps, walls, *values) -> bytes:
        return numpy_codec.encode(steps, walls, *values, kinds=kinds, decimal=decimal)

    def with_stdlib(steps, walls, *values) -> bytes:
        return stdlib_codec.encode(steps, walls, *values, kinds=kinds, decimal=decimal)

    return with_numpy, with_stdlib


CODECS = {  # name -> (stream kinds or None: not ours, DECIMAL tried, what it is)
    "shuffle+zlib": ((DELTA, DELTA, SHUFFLE), True, "the format's choice"),
    "shuffle, no decimal": ((DELTA, DELTA, SHUFFLE), False, "decimals as their bit patterns"),
    "xor+shuffle+zlib": ((DELTA, DELTA, XOR), True, "values XOR previous, then shuffled"),
    "delta+shuffle+zlib": ((DELTA, DELTA, DELTA), True, "values minus previous, then shuffled"),
    "shuffle, walls dod": ((DELTA, DELTA2, SHUFFLE), True, "walls delta-of-delta"),
    "plain zlib": (None, False, "each column's raw bytes through zlib -6"),
    "shuffle+lzma": (None, False, "shuffled columns through lzma (xz -6)"),
}
TIMED = ("shuffle+zlib", "shuffle, no decimal", "xor+shuffle+zlib")  # stdlib timings too


# -- Gorilla (VLDB 2015), bit-packed, pure Python: the reference point for XOR encoding --------


class BitWriter:
    def __init__(self) -> None:
        self.acc = 0
        self.bits = 0

    def write(self, value: int, nbits: int) -> None:
        self.acc = (self.acc << nbits) | (value & ((1 << nbits) - 1))
        self.bits += nbits

    def nbytes(self) -> int:
        return (self.bits + 7) // 8


def gorilla_size(steps: list, walls_bits: list, values_bits: list) -> tuple[int, int]:
    """Bytes of one chunk: steps and walls delta-of-delta with Gorilla's prefix buckets (walls
    as 64-bit patterns, as they must stay exact), values XOR with leading/trailing zero runs."""
    w = BitWriter()
    for col in (steps, walls_bits):
        w.write(col[0], 64)
        prev, delta = col[0], 0
        for x in col[1:]:
            d = x - prev
            dod = d - delta
            if dod == 0:
                w.write(0, 1)
            elif -63 <= dod <= 64:
                w.write(0b10, 2)
                w.write(dod, 7)
            elif -255 <= dod <= 256:
                w.write(0b110, 3)
                w.write(dod, 9)
            elif -2047 <= dod <= 2048:
                w.write(0b1110, 4)
                w.write(dod, 12)
            else:
                w.write(0b1111, 4)
                w.write(dod, 64)
            prev, delta = x, d
    times = w.bits
    for col in values_bits:
        w.write(col[0], 64)
        prev, lead, trail = col[0], -1, 0
        for x in col[1:]:
            v = x ^ prev
            prev = x
            if v == 0:
                w.write(0, 1)
                continue
            lz = min(31, 64 - v.bit_length())
            tz = (v & -v).bit_length() - 1
            if lead >= 0 and lz >= lead and tz >= trail:
                w.write(0b10, 2)
                w.write(v >> trail, 64 - lead - trail)
            else:
                lead, trail = lz, tz
                w.write(0b11, 2)
                w.write(lz, 5)
                w.write(64 - lz - tz - 1, 6)
                w.write(v >> tz, 64 - lz - tz)
    return (times + 7) // 8, (w.bits - times + 7) // 8


# -- measuring -----------------------------------------------------------------------------------


def chunks_of(series: list[tuple[np.ndarray, np.ndarray, list[np.ndarray]]], size: int):
    for steps, walls, values in series:
        for a in range(0, len(steps), size):
            yield steps[a : a + size], walls[a : a + size], [v[a : a + size] for v in values]


def timed(fn: Callable[[], object]) -> float:
    """CPU seconds of this process: the machine is shared, and wall time counts the others."""
    gc.collect()
    t = time.process_time()
    fn()
    return time.process_time() - t


def measure(name: str, series: list, size: int, points: int, quick: bool) -> dict:
    kinds, decimal, _ = CODECS[name]
    parts = list(chunks_of(series, size))
    row: dict = {"codec": name, "chunk": size}
    if kinds is None:
        compress = (lambda b: zlib.compress(b, 6)) if name == "plain zlib" else lzma.compress
        enc = _plain(compress, name != "plain zlib")
        blobs: list[bytes] = []
        row["enc_np"] = timed(lambda: blobs.extend(enc(s, w, *v) for s, w, v in parts))
        row["bytes"] = sum(map(len, blobs))
        return row
    with_numpy, with_stdlib = _ours(kinds, decimal)
    blobs = []
    row["enc_np"] = timed(lambda: blobs.extend(with_numpy(s, w, *v) for s, w, v in parts))
    row["bytes"] = sum(map(len, blobs))
    row["dec_np"] = timed(lambda: [numpy_codec.decode(b) for b in blobs])
    if not quick:
        lists = [(s.tolist(), w.tolist(), [x.tolist() for x in v]) for s, w, v in parts]
        again: list[bytes] = []
        row["enc_py"] = timed(lambda: again.extend(with_stdlib(s, w, *v) for s, w, v in lists))
        assert again == blobs, f"{name}: the stdlib encoder wrote other bytes"
        row["dec_py"] = timed(lambda: [stdlib_codec.decode(b) for b in blobs])
    return row


def baseline(steps: int, rng: np.random.Generator) -> dict:
    """A real store written through reslog: its bytes a point and scan() ns a point."""
    import reslog
    from schema.store.connect import open_store
    from schema.store.reader import StoreReader

    _, _, keys = training(steps, rng)
    names = list(keys)
    columns = [keys[k].tolist() for k in names]
    rows = [dict(zip(names, vals, strict=True)) for vals in zip(*columns, strict=True)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "base.db"
        run = reslog.init(
            "codec", name="base", store=path, system=False, on_full="block", finish_timeout=3600
        )
        t = time.perf_counter()
        for s, metrics in enumerate(rows):
            run.log(metrics, step=s)
        run.finish()
        write_s = time.perf_counter() - t
        npoints = steps * len(names)
        wal = Path(str(path) + "-wal")
        size = path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
        reader = reslog.open(path)
        key = "train/loss"
        list(reader.scan("base", "train/lr"))  # pandas imported, the store's pages warm
        frames: list = []
        scan_s = timed(lambda: frames.extend(reader.scan("base", key)))
        got = sum(len(f) for f in frames)
        assert got == steps, (got, steps)
        engine = open_store(path, readonly=True)
        store = StoreReader(engine, store=str(path))
        row_id, _ = store.find("base")
        key_id = reader._series("base", key)[1][key]
        rows_s = timed(lambda: [len(b) for b in store.scan(row_id, key_id)])
        engine.dispose()
    return {
        "points": npoints,
        "bytes": size,
        "write_s": write_s,
        "scan_s": scan_s,
        "rows_s": rows_s,
        "key_points": steps,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--sizes", default="1024,4096,16384")
    ap.add_argument("--baseline-steps", type=int, default=100_000, help="0: no baseline")
    ap.add_argument("--gorilla-points", type=int, default=4096, help="a series' points sampled")
    ap.add_argument("--quick", action="store_true", help="numpy timings only")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(30)
    tsteps, twalls, tkeys = training(args.steps, rng)
    nsteps, nwalls, nkeys = nvml(args.steps, rng)
    per_series = [(tsteps, twalls, [v]) for v in tkeys.values()]
    per_series += [(nsteps, nwalls, [v]) for v in nkeys.values()]
    grouped = [(tsteps, twalls, list(tkeys.values())), (nsteps, nwalls, list(nkeys.values()))]
    points = sum(len(s) for s, _, _ in per_series)
    print(
        f"workload: {len(tkeys)} training keys x {args.steps:,} steps + {len(nkeys)} NVML keys"
        f" x {len(nsteps):,} samples = {points:,} points;"
        f" load {os.getloadavg()[0]:.2f}"
    )

    def show(row: dict) -> None:
        def ns(key: str) -> str:
            return f"{row[key] / points * 1e9:8.1f}" if key in row else "       -"

        print(
            f"{row['codec']:<26} {row['chunk']:>6} {row['bytes'] / points:8.3f}"
            f" {ns('enc_py')} {ns('enc_np')} {ns('dec_py')} {ns('dec_np')}"
        )

    print(
        f"\n{'codec (one series a chunk)':<26} {'chunk':>6} {'B/point':>8} {'enc py':>8}"
        f" {'enc np':>8} {'dec py':>8} {'dec np':>8}   (ns a point)"
    )
    sizes = [int(x) for x in args.sizes.split(",")]
    for size in sizes:
        for name in CODECS:
            if name == "shuffle+lzma" and size != 4096:
                continue  # ~10 us a point
            quick = args.quick or name not in TIMED or size != 4096
            show(measure(name, per_series, size, points, quick))
    print(f"\n{'one step/wall stream a group':<26}")
    for size in sizes:
        for name in TIMED:
            show(measure(name, grouped, size, points, args.quick or size != 4096))

    # Per column kinds: which would win series by series (4,096-point chunks)
    wins: dict[str, int] = {}
    best = 0
    for _, _, values in chunks_of(per_series, 4096):
        sizes_of = {
            k: len(numpy_codec.encode_floats(values[0], k)[1]) for k in (SHUFFLE, XOR, DELTA)
        }
        k = min(sizes_of, key=sizes_of.get)
        wins[stdlib_codec.KIND_NAMES[k]] = wins.get(stdlib_codec.KIND_NAMES[k], 0) + 1
        best += sizes_of[k] - sizes_of[SHUFFLE]
    print(
        f"\nbest value kind chunk by chunk (4,096): {wins}; would save {best / points:+.3f}"
        " B/point against shuffle alone"
    )

    if args.gorilla_points:
        sample = [
            (
                s[: args.gorilla_points],
                w[: args.gorilla_points],
                [v[: args.gorilla_points] for v in vs],
            )
            for s, w, vs in per_series
        ]
        spoints = sum(len(s) for s, _, _ in sample)
        g_times = g_values = 0
        t = time.process_time()
        for steps, walls, values in sample:
            a, b = gorilla_size(
                steps.tolist(),
                walls.view(np.int64).tolist(),
                [v.view(np.int64).tolist() for v in values],
            )
            g_times, g_values = g_times + a, g_values + b
        g_s = time.process_time() - t
        ours = ours_values = 0
        for s, w, v in sample:
            blob = numpy_codec.encode(s, w, *v)
            ours += len(blob)
            ours_values += sum(size for _, size in stdlib_codec.describe(blob)["streams"][2:])
        print(
            f"\nGorilla, pure Python, first {args.gorilla_points:,} points of each series"
            f" ({spoints:,} points), B/point: values (XOR) {g_values / spoints:.3f}, steps and"
            f" walls (delta-of-delta) {g_times / spoints:.3f},"
            f" all {(g_times + g_values) / spoints:.3f};"
            f" encode {g_s / spoints * 1e9:,.0f} ns/point. shuffle+zlib on the same points:"
            f" values {ours_values / spoints:.3f}, all {ours / spoints:.3f}"
        )

    print("\nzlib level (an encoder choice: the format and decoder are the same), shuffle+zlib:")
    for level in (1, 6, 9):
        stdlib_codec.LEVEL = level
        row = measure("shuffle+zlib", per_series, 4096, points, True)
        row["codec"] = f"  level {level}"
        show(row)
    stdlib_codec.LEVEL = 6

    if args.baseline_steps:
        b = baseline(args.baseline_steps, np.random.default_rng(30))
        print(
            f"\nbaseline, today's store (reslog {b['points']:,} points, 20 training keys x"
            f" {args.baseline_steps:,} steps): {b['bytes'] / b['points']:.1f} B/point;"
            f" reslog.open().scan() of one key {b['scan_s'] / b['key_points'] * 1e9:,.0f}"
            f" ns/point (DataFrames), StoreReader.scan rows"
            f" {b['rows_s'] / b['key_points'] * 1e9:,.0f} ns/point"
        )
        scan_ns = b["scan_s"] / b["key_points"] * 1e9
        rows_ns = b["rows_s"] / b["key_points"] * 1e9
        n = len(tsteps)
        loss = [(tsteps, twalls, [tkeys["train/loss"]])]
        alone = [numpy_codec.encode(s, w, *v) for s, w, v in chunks_of(loss, 4096)]
        group = [numpy_codec.encode(s, w, *v) for s, w, v in chunks_of(grouped[:1], 4096)]
        print(
            f"reading train/loss ({n:,} points) from 4,096-point chunks, ns/point"
            f" (x faster than scan() / than its rows):"
        )
        for what, blobs, cols in (("its own chunks", alone, None), ("its group's", group, [0])):
            dec_np = timed(lambda b=blobs, c=cols: [numpy_codec.decode(x, c) for x in b]) / n * 1e9
            dec_py = timed(lambda b=blobs, c=cols: [stdlib_codec.decode(x, c) for x in b]) / n * 1e9
            print(
                f"  {what:<15} numpy {dec_np:7.1f} ({scan_ns / dec_np:,.0f}x"
                f" / {rows_ns / dec_np:,.0f}x)   stdlib {dec_py:7.1f} ({scan_ns / dec_py:,.0f}x"
                f" / {rows_ns / dec_py:,.0f}x)"
                f"   blob bytes read {sum(map(len, blobs)) / n:.2f} a point"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
