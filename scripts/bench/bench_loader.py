"""Data loader throughput vs what the demo model consumes, measured in one run on this machine.

    python scripts/bench/bench_loader.py [--config trainer/configs/demo.toml] [--seconds 5]

Builds a small stdlib corpus and prepares it (temp dir), then measures:
  1. the loader alone: batches pulled as fast as possible (prefetch thread on, and off);
  2. the model alone: forward + backward + AdamW of the config on CPU, on a fixed batch;
  3. the two together: a training loop fed by the loader, timing how long next() blocks.
Prints a table and the ratio loader tokens/s / model tokens/s (>> 1 means the loader is never
the bottleneck). Falls back to the loader alone when trainer.model is not importable.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from trainer.corpus import build_corpus  # noqa: E402
from trainer.data import ShardLoader  # noqa: E402
from trainer.parts import Batches  # noqa: E402
from trainer.prepare import prepare  # noqa: E402


def loader_rate(data: Path, B: int, T: int, prefetch: int, seconds: float) -> float:
    with ShardLoader(data, Batches(B, T), prefetch=prefetch) as loader:
        next(loader)
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            x, _ = next(loader)
            n += x.numel()
        return n / (time.perf_counter() - t0)


def build_model(config: Path, data: Path):
    from trainer.config import load_config
    from trainer.data import read_manifest
    from trainer.model import Transformer

    cfg = load_config(config, ["--data.dir", str(data)])
    if not cfg.model.vocab_size:
        cfg.model.vocab_size = int(read_manifest(data)["vocab_size"])
    torch.manual_seed(0)
    model = Transformer(cfg.model)
    return cfg, model, torch.optim.AdamW(model.parameters(), lr=cfg.optim.lr)


def model_rate(model, opt, B: int, T: int, vocab: int, seconds: float) -> float:
    x = torch.randint(0, vocab, (B, T))
    y = torch.randint(0, vocab, (B, T))

    def step() -> None:
        model(x, y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()
    n, t0 = 0, time.perf_counter()
    while n < 3 or time.perf_counter() - t0 < seconds:
        step()
        n += 1
    return n * B * T / (time.perf_counter() - t0)


def fed_loop(model, opt, data: Path, B: int, T: int, seconds: float) -> tuple[float, float]:
    """(tokens/s of the loop, fraction of wall time spent blocked in next())."""
    with ShardLoader(data, Batches(B, T), prefetch=2) as loader:
        x, y = next(loader)
        wait = 0.0
        n, t0 = 0, time.perf_counter()
        while n < 3 or time.perf_counter() - t0 < seconds:
            w0 = time.perf_counter()
            x, y = next(loader)
            wait += time.perf_counter() - w0
            model(x, y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            n += 1
        total = time.perf_counter() - t0
    return n * B * T / total, wait / total


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", type=Path, default=ROOT / "trainer/configs/demo.toml")
    p.add_argument("--seconds", type=float, default=5.0, help="per measurement (5)")
    p.add_argument("--repeats", type=int, default=3, help="runs of each measurement (3)")
    p.add_argument("--corpus-mb", type=float, default=2.0)
    p.add_argument("--vocab-size", type=int, default=4096)
    args = p.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        build_corpus(tmp / "c.jsonl", max_bytes=int(args.corpus_mb * 1e6))
        data = tmp / "data"
        prepare([tmp / "c.jsonl"], data, vocab_size=args.vocab_size, log=lambda s: None)

        model = None
        B, T = 8, 256
        try:
            cfg, model, opt = build_model(args.config, data)
            B, T = cfg.data.batch_size, cfg.data.seq_len
            label = f"{args.config.name}: {sum(q.numel() for q in model.parameters()) / 1e6:.2f}M"
        except Exception as e:  # trainer.model or the config not there yet
            print(f"(model not measured: {type(e).__name__}: {e})")

        print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, B={B} T={T}")
        # The machine may be shared: every measurement runs --repeats times, interleaved, and
        # the best (least disturbed) rate is reported next to the median.
        measures = {
            "loader, prefetch=2": lambda: loader_rate(data, B, T, 2, args.seconds),
            "loader, prefetch=0": lambda: loader_rate(data, B, T, 0, args.seconds),
        }
        waits: list[float] = []
        if model is not None:
            vocab = cfg.model.vocab_size

            def fed() -> float:
                rate, wait = fed_loop(model, opt, data, B, T, args.seconds)
                waits.append(wait)
                return rate

            measures[f"model fwd+bwd+AdamW ({label})"] = lambda: model_rate(
                model, opt, B, T, vocab, args.seconds
            )
            measures["model fed by loader (prefetch=2)"] = fed
        results: dict[str, list[float]] = {name: [] for name in measures}
        for _ in range(args.repeats):
            for name, measure in measures.items():
                results[name].append(measure())

    print(f"{'measurement':<52} {'best tok/s':>14} {'median tok/s':>14}")
    for name, rates in results.items():
        print(f"{name:<52} {max(rates):>14,.0f} {statistics.median(rates):>14,.0f}")
    if model is not None:
        best = [max(r) for r in results.values()]
        print(f"ratio loader (prefetch=2) / model, best: {best[0] / best[2]:,.0f}x")
        print(f"time blocked in next() while training: {100 * statistics.median(waits):.2f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
