"""GPU check 7: `torchrun --nproc_per_node 1` trains with DDP and torch.compile, and a run resumed
from its mid-way checkpoint continues the uninterrupted run's loss curve.

Run A trains ``--steps`` steps with a checkpoint at ``--ckpt-at``; run B starts from that
checkpoint (and a copy of A's store as it was, so it continues the same reslog run) and trains
to the same end. B's losses from ``--ckpt-at``+1 on are compared with A's: equal within
``--tol`` (relative), and how many are bit-for-bit equal is reported.

    python scripts/gpu/ddp_resume.py --out OUTDIR --data PREPARED_DIR [--steps 40 --ckpt-at 20]
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpucheck


def torchrun(args: list[str], log: Path, env: dict[str, str]) -> int:
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "1",
        "-m",
        "trainer.train",
        *args,
    ]
    with open(log, "w") as f:
        f.write(" ".join(cmd) + "\n")
        f.flush()
        proc = subprocess.run(cmd, cwd=gpucheck.ROOT, env=env, stdout=f, stderr=subprocess.STDOUT)
    return proc.returncode


def copy_store(src: Path, dst: Path) -> None:
    """A consistent copy of a SQLite store (the backup API: WAL and all)."""
    dst.unlink(missing_ok=True)
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)


def losses(store: Path, run: str) -> dict[int, float]:
    """train/loss by step; a step logged again (the resumed take) keeps its newest value."""
    return {s: v for s, _w, v in gpucheck.read_points(store, run).get("train/loss", [])}


def run_config(store: Path, run: str) -> dict:
    from schema.store.connect import open_store
    from schema.store.read import find_run

    engine = open_store(str(store), readonly=True)
    try:
        with engine.connect() as conn:
            _, info = find_run(conn, run)
            return info.config or {}
    finally:
        engine.dispose()


def main(argv: list[str] | None = None) -> int:
    p = gpucheck.parser(__doc__)
    p.add_argument("--data", type=Path, help="prepared data (trainer.prepare); default synthetic")
    p.add_argument("--config", type=Path, default=gpucheck.ROOT / "trainer/configs/demo.toml")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--ckpt-at", type=int, default=20)
    p.add_argument("--tol", type=float, default=1e-2, help="allowed relative loss difference")
    args = p.parse_args(argv)
    gpucheck.require_cuda("ddp_resume", args.cpu_dry_run)
    res = gpucheck.Result("ddp_resume", args.out, args.cpu_dry_run)
    work = args.out / "ddp_resume"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)

    device = (
        ["--train.device", "cpu", "--train.threads", "1"]
        if args.cpu_dry_run
        else ["--train.device", "cuda", "--train.compile", "true", "--train.dtype", "bf16"]
    )
    config = gpucheck.ROOT / "trainer/configs/debug.toml" if args.cpu_dry_run else args.config
    data = (
        ["--data.source", "shards", "--data.dir", str(args.data)]
        if args.data
        else ["--data.source", "synthetic", "--model.vocab_size", "512"]
    )
    common = [
        "--config",
        str(config),
        *device,
        *data,
        "--train.steps",
        str(args.steps),
        "--train.eval_every",
        "0",
        "--logging.print_every",
        "10",
        "--logging.system_interval",
        "1.0",
        "--logging.project",
        "gpu-check",
    ]
    env = {**gpucheck.child_env(), "OMP_NUM_THREADS": "1"}
    a_store, b_store = work / "a.db", work / "b.db"
    rc_a = torchrun(
        [
            *common,
            "--train.ckpt_every",
            str(args.ckpt_at),
            "--train.ckpt_dir",
            str(work / "a-ckpt"),
            "--train.keep_last",
            "10",
            "--logging.store",
            str(a_store),
            "--logging.name",
            "ddp-a",
        ],
        work / "a.log",
        env,
    )
    details: dict = {"run_a_exit": rc_a, "logs": [str(work / "a.log"), str(work / "b.log")]}
    rc_b = None
    if rc_a == 0:
        mid = work / "a-ckpt" / f"step_{args.ckpt_at:08d}"
        shutil.copytree(mid, work / "b-ckpt" / mid.name)
        copy_store(a_store, b_store)
        # B is A's run, continued: the same uid, now in a copy of A's store.
        rc_b = torchrun(
            [
                *common,
                "--resume",
                str(work / "b-ckpt"),
                "--train.ckpt_dir",
                str(work / "b-ckpt"),
                "--logging.store",
                str(b_store),
            ],
            work / "b.log",
            env,
        )
    details["run_b_exit"] = rc_b
    ok = rc_a == 0 and rc_b == 0
    if ok:
        la, lb = losses(a_store, "ddp-a"), losses(b_store, "ddp-a")
        after = range(args.ckpt_at + 1, args.steps + 1)
        pairs = [(s, la.get(s), lb.get(s)) for s in after]
        missing = [s for s, x, y in pairs if x is None or y is None]
        diffs = [abs(x - y) / max(abs(x), 1e-12) for _, x, y in pairs if x is not None and y]
        runtime = run_config(a_store, "ddp-a").get("runtime", {})
        details.update(
            steps_compared=len(pairs),
            missing_steps=missing,
            max_rel_diff=max(diffs) if diffs else None,
            bitwise_equal=sum(x == y for _, x, y in pairs),
            losses=[{"step": s, "a": x, "b": y} for s, x, y in pairs],
            ddp=runtime.get("ddp"),
            world_size=runtime.get("world_size"),
            kernels=runtime.get("kernels"),
        )
        ok = not missing and bool(diffs) and max(diffs) <= args.tol and runtime.get("ddp") is True
        summary = (
            f"torchrun x1 {'with' if runtime.get('ddp') else 'WITHOUT'} DDP"
            f"{'' if args.cpu_dry_run else ' + compile'}: resumed at step {args.ckpt_at}, "
            f"losses of steps {args.ckpt_at + 1}-{args.steps}: max rel. diff "
            f"{details['max_rel_diff']:.2e} (bar {args.tol:g}), "
            f"{details['bitwise_equal']}/{len(pairs)} bit-for-bit equal"
        )
    else:
        summary = f"torchrun failed (run A exit {rc_a}, run B exit {rc_b}): see {work}/*.log"
    res.details = details
    res.judge(ok, summary)
    res.write()
    print(res.summary)
    return res.exit_code()


if __name__ == "__main__":
    sys.exit(main())
