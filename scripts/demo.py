"""The demo: raw text -> tokenizer -> token shards -> a small LLaMA-style model trained on CPU,
logged to runs/reslog.db, shown in resplot (or a PNG snapshot and a CSV export without a display).

    python scripts/demo.py [--minutes 3] [--no-gui] [--fresh]

Every artefact goes under --workdir (default runs/demo): the corpus (this Python's standard
library sources), the prepared shards and tokenizer, the checkpoints. The run goes into --store.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from a checkout without an install
    sys.path.insert(0, str(ROOT))

from trainer.corpus import build_corpus  # noqa: E402
from trainer.prepare import MANIFEST, prepare  # noqa: E402


def say(msg: str) -> None:
    print(f"[demo] {msg}", flush=True)


def module_command(module: str) -> list[str] | None:
    """How to run ``module``'s ``main()`` as a subprocess, or None when it is not built."""
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        return None
    return [sys.executable, "-c", f"import sys; from {module} import main; sys.exit(main())"]


def display_available() -> bool:
    """A screen PyQt5 can really open (checked in a child, so a broken Qt cannot hurt us)."""
    if os.environ.get("QT_QPA_PLATFORM", "") in ("offscreen", "minimal"):
        return False
    if sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    ):
        return False
    probe = "from PyQt5.QtWidgets import QApplication; QApplication([])"
    try:
        r = subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def calibrate_steps(config: Path, data_dir: Path, seconds: float) -> tuple[int, float] | None:
    """Optimizer steps that fit in ``seconds`` on this machine, from a few timed steps."""
    try:
        import torch

        from trainer.config import load_config
        from trainer.data import ShardLoader, read_manifest
        from trainer.model import Transformer
        from trainer.parts import Batches
    except ImportError as e:
        say(f"cannot time the model ({e}); using the config's step count")
        return None
    cfg = load_config(config, ["--data.dir", str(data_dir)])
    if not cfg.model.vocab_size:
        cfg.model.vocab_size = int(read_manifest(data_dir)["vocab_size"])
    if cfg.train.threads:
        torch.set_num_threads(cfg.train.threads)
    torch.manual_seed(0)
    model = Transformer(cfg.model)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.optim.lr)
    d = cfg.data
    with ShardLoader(data_dir, Batches(d.batch_size, d.seq_len), prefetch=1) as loader:

        def step() -> None:
            for _ in range(d.grad_accum):
                x, y = next(loader)
                model(x, y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        step()  # warm-up: allocations, kernel selection
        times: list[float] = []
        t_start = time.perf_counter()
        while len(times) < 5 or time.perf_counter() - t_start < 3.0:
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
        # The fastest step, not the mean: a burst of load from other jobs during these few
        # seconds would otherwise shrink the run several-fold. --train.max_minutes stops the
        # trainer at the budget if the machine stays slower than this.
        per_step = min(times)
    # Leave room for start-up, validation passes and the final checkpoint.
    return max(20, int(seconds * 0.8 / per_step)), per_step


def run_training(cmd: list[str], limit_s: float) -> int:
    """Run the trainer in the foreground; Ctrl+C reaches it; past ``limit_s`` it is interrupted
    (a slow or busy machine), which is not a failure of the demo: that returns 0."""
    proc = subprocess.Popen(cmd, cwd=ROOT)
    try:
        return proc.wait(timeout=limit_s)
    except subprocess.TimeoutExpired:
        say(f"training ran past {limit_s:.0f} s: interrupting it (the run keeps what it logged)")
        proc.send_signal(signal.SIGINT)
        try:
            rc = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
        return 0 if rc in (0, 130, -signal.SIGINT) else rc
    except KeyboardInterrupt:
        say("interrupted: waiting for the trainer to close its run")
    try:
        return proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def latest_run(engine, project: str):
    """(row id, RunInfo) of the newest run of ``project``, or None."""
    from schema.store.read import list_runs

    with engine.connect() as conn:
        runs = list_runs(conn, project=project)
    return runs[-1] if runs else None


def loss_summary(engine, run_id: int) -> str | None:
    from schema.store.read import key_names, series

    with engine.connect() as conn:
        ids = {name: kid for kid, name in key_names(conn).items()}
    if "train/loss" not in ids:
        return None
    steps, _, values = series(engine, run_id, ids["train/loss"])
    if len(values) < 2:
        return None
    k = max(1, len(values) // 10)
    first, last = sum(values[:k]) / k, sum(values[-k:]) / k
    return (
        f"train/loss {first:.3f} (mean of the first {k} steps) -> {last:.3f} "
        f"(mean of the last {k}, step {steps[-1]})"
    )


def upgrade_own_store(store: Path) -> None:
    """A store left by an older demo (an older schema) is the demo's own: bring it up to date
    (with a backup beside it) rather than failing, and say so."""
    if not store.exists():
        return
    from reslog.tools.maintenance import upgrade_store
    from schema.store.errors import StoreError

    try:
        line = upgrade_store(str(store))
    except StoreError as exc:
        say(f"store {store}: {exc} (delete it to start afresh)")
        raise SystemExit(2) from None
    if "nothing to do" not in line:
        say(line)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/demo.py", description=__doc__.split("\n")[0])
    p.add_argument("--minutes", type=float, default=3.0, help="training time budget (3)")
    p.add_argument("--workdir", type=Path, default=Path("runs/demo"), help="artefacts (runs/demo)")
    p.add_argument("--store", type=Path, default=Path("runs/reslog.db"), help="reslog store")
    p.add_argument("--config", type=Path, default=ROOT / "trainer/configs/demo.toml")
    p.add_argument("--corpus-mb", type=float, default=8.0, help="corpus size cap in MB (8)")
    p.add_argument("--vocab-size", type=int, default=4096, help="BPE vocabulary (4096)")
    p.add_argument("--no-gui", action="store_true", help="never open resplot, write PNG + CSV")
    p.add_argument("--fresh", action="store_true", help="rebuild the corpus and shards")
    args = p.parse_args(argv)
    if args.minutes <= 0:
        p.error("--minutes must be > 0")
    if not args.config.is_file():
        p.error(f"--config {args.config}: no such file (helper configs live in trainer/configs/)")
    work, store = args.workdir.resolve(), args.store.resolve()
    corpus = work / "corpus" / "stdlib.jsonl"
    data_dir = work / "data"
    png, csv = store.parent / "demo.png", store.parent / "demo.csv"
    t_start = time.perf_counter()

    # 1. corpus: real text present on every machine with Python, no download.
    # What the corpus and shards were built with: a change rebuilds them.
    stamp_path = work / "demo-data.json"
    stamp = {"corpus_mb": args.corpus_mb, "vocab_size": args.vocab_size, "python": sys.version}
    fresh = args.fresh or not stamp_path.is_file() or json.loads(stamp_path.read_text()) != stamp
    if fresh or not corpus.is_file():
        info = build_corpus(corpus, max_bytes=int(args.corpus_mb * 1e6))
        say(f"corpus: {info.documents} stdlib sources, {info.bytes / 1e6:.1f} MB -> {corpus}")
        fresh = True
    else:
        say(f"corpus: reusing {corpus} (--fresh rebuilds it)")

    # 2. tokenizer + shards.
    if fresh or not (data_dir / MANIFEST).is_file():
        stamp_path.unlink(missing_ok=True)
        m = prepare(
            [corpus],
            data_dir,
            vocab_size=args.vocab_size,
            valid_fraction=0.02,
            force=True,
            log=lambda s: say(f"prepare: {s}"),
        )
        stamp_path.write_text(json.dumps(stamp))
    else:
        m = json.loads((data_dir / MANIFEST).read_text())
        say(f"data: reusing {data_dir} (--fresh rebuilds it)")
    tr, va = m["splits"]["train"]["tokens"], m["splits"]["valid"]["tokens"]
    say(f"data: {tr:,} train + {va:,} valid tokens, vocab {m['vocab_size']} -> {data_dir}")

    # 3. train for about --minutes.
    budget = args.minutes * 60
    cal = calibrate_steps(args.config, data_dir, budget)
    overrides = [
        "--data.dir",
        str(data_dir),
        "--logging.store",
        str(store),
        "--train.ckpt_dir",
        str(work / "checkpoints"),
        # A hard stop as well: calibration is optimistic when other jobs share the CPU.
        "--train.max_minutes",
        f"{args.minutes:g}",
    ]
    if cal is not None:
        steps, per_step = cal
        say(f"one optimizer step takes {per_step:.2f} s here: training {steps} steps")
        overrides += ["--train.steps", str(steps)]
    store.parent.mkdir(parents=True, exist_ok=True)
    upgrade_own_store(store)
    cmd = [sys.executable, "-m", "trainer.train", "--config", str(args.config), *overrides]
    say("training: " + " ".join(cmd[1:]))

    gui = None
    want_gui = not args.no_gui and display_available()
    resplot = module_command("resplot.cli")
    if want_gui and resplot is not None:
        # Started next to the trainer so the charts are live; it stays open after the demo.
        gui_cmd = [*resplot, str(store)]
        say(f"opening resplot: resplot {store}")
        gui = subprocess.Popen(gui_cmd, cwd=ROOT, start_new_session=True)
    rc = run_training(cmd, limit_s=budget * 1.5 + 120)
    say(f"training exited with status {rc}")

    # 4. where to look.
    from trainer.config import load_config

    project = load_config(args.config, ["--data.dir", str(data_dir)]).logging.project
    from schema.store.connect import open_store

    if not store.exists():
        say(f"no store at {store}: nothing to show")
        return rc or 1
    engine = open_store(store, readonly=True)
    try:
        latest = latest_run(engine, project)
        if latest is None:
            say(f"no run of project {project!r} in {store}: nothing to show")
            return rc or 1
        run_id, run = latest
        summary = loss_summary(engine, run_id)
    finally:
        engine.dispose()
    say(f"run {run.ref.uid} ({run.name}), status {run.status}")
    if summary:
        say(summary)

    reslog = module_command("reslog.tools.cli")
    if reslog is None:
        say("reslog CLI not found (pip install -e .): no CSV export")
    else:
        ok = subprocess.run(
            [
                *reslog,
                "export",
                str(store),
                "--runs",
                run.ref.uid,
                "--format",
                "csv",
                "-o",
                str(csv),
            ]
        )
        say(f"CSV export -> {csv}" if ok.returncode == 0 else "CSV export failed (see above)")
    if resplot is None:
        say("resplot is not built yet (no resplot.cli): no chart; the CSV has every point")
    elif gui is None:
        ok = subprocess.run(
            [*resplot, "snapshot", str(store), "--runs", run.ref.uid, "-o", str(png)]
        )
        say(f"chart snapshot -> {png}" if ok.returncode == 0 else "snapshot failed (see above)")
    else:
        say("resplot is open on the run (close its window when done)")

    minutes = (time.perf_counter() - t_start) / 60
    say(f"done in {minutes:.1f} min. store {store} | data {data_dir} | corpus {corpus}")
    say(f"look again: reslog ls {store}  |  resplot {store}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
