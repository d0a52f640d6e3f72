"""The sweep bench_live_poll.py follows: a store of `runs` runs x `steps` steps, built once
in the temp folder through the rollup writer, with what the followed page draws (PAGE_KEYS),
and the live runs' writers that append steps to it between polls (Sweep)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from common import built, built_marker

KEYS = ("train/loss", "train/lr", "train/grad_norm", "train/tokens_per_s")
# What a page's store logs besides KEYS at every step: --page timing, each step's timed parts
# (the Timing page's stacks and step time); --page system, two GPUs' telemetry.
PAGE_KEYS = {
    "training": (),
    "timing": ("time/data", "time/forward", "time/backward", "time/optimizer", "time/step"),
    "system": tuple(
        f"sys/gpu{g}/{k}" for g in (0, 1) for k in ("util", "temp_c", "power_w", "throttle")
    ),
}
TOKENS_PER_STEP = 4096.0
POWER_CAP = 0x4  # NVML's clock-event reason (schema/rules/throttle.py)


def series_values(
    i: int, s: np.ndarray, page: str = "training", tokens: bool = False
) -> dict[str, np.ndarray]:
    out = {
        "train/loss": 2.5 + 0.05 * i + 2 * np.exp(-s / 30_000) + 0.02 * np.sin(s * (i + 1)),
        "train/lr": 3e-4 * np.minimum(1.0, (s + 1) / 2000.0),
        "train/grad_norm": 1.0 + 0.1 * np.sin(s / 10.0 + i),
        "train/tokens_per_s": 40_000.0 + 10.0 * ((s + i) % 7),
    }
    if tokens:  # the tokens seen, for the tokens x axis (its guide)
        out["train/tokens"] = TOKENS_PER_STEP * (s + 1.0)
    if page == "timing":
        jitter = 0.002 * np.sin(s / 7.0 + i)
        parts = {"data": 0.01, "forward": 0.1, "backward": 0.2, "optimizer": 0.03}
        out |= {f"time/{name}": v + jitter for name, v in parts.items()}
        out["time/step"] = sum(parts.values()) + 0.02 + 4 * jitter
    if page == "system":
        for g in (0, 1):
            capped = ((s + 7_000 * (i + g)) // 5_000) % 4 == 0
            out[f"sys/gpu{g}/util"] = 90.0 + 5.0 * np.sin(s / 50.0 + i + g)
            out[f"sys/gpu{g}/temp_c"] = 70.0 + 3.0 * np.sin(s / 500.0 + g)
            out[f"sys/gpu{g}/power_w"] = np.where(capped, 700.0, 600.0 + 20.0 * np.sin(s / 9.0))
            out[f"sys/gpu{g}/throttle"] = np.where(capped, float(POWER_CAP), 0.0)
    return out


def store_path(args) -> Path:
    page = "" if args.page == "training" else f"-{args.page}"
    tokens = "-tokens" if getattr(args, "x_axis", "auto") == "tokens" else ""
    name = f"reslog-live{page}{tokens}-{args.runs}x{args.steps}.db"
    return Path(tempfile.gettempdir()) / name


def build_store(
    path: Path, runs: int, steps: int, page: str = "training", tokens: bool = False
) -> None:
    """The sweep, written once through the rollup writer (kept in the temp folder), with what
    `page` draws (PAGE_KEYS), and with `tokens` the tokens each run has seen."""
    from schema.store.rollup_writer import RollupWriter
    from tests.fixtures.stores import BASE_TIME, key_id, make_run, new_store

    marker = built_marker(path)
    if marker is None:
        return
    engine = new_store(path)
    keys = (*KEYS, *PAGE_KEYS[page], *(("train/tokens",) if tokens else ()), "valid/loss")
    ids = {k: key_id(engine, k) for k in keys}
    for i in range(runs):
        run = make_run(
            engine,
            name=f"sweep-lr{i + 1}e-4-bs{256 << (i % 3)}",
            status="running",
            created_at=BASE_TIME + i,
            heartbeat_at=BASE_TIME + 1e7,
        )
        writer = RollupWriter(engine.dialect, run.id)
        for a in range(0, steps, 50_000):
            s = np.arange(a, min(steps, a + 50_000))
            walls = (BASE_TIME + s * 0.3).tolist()
            rows = []
            for key, values in series_values(i, s, page, tokens).items():
                rows += zip(
                    [run.id] * len(s),
                    [ids[key]] * len(s),
                    s.tolist(),
                    walls,
                    values.tolist(),
                    strict=True,
                )
            sv = s[s % 500 == 0]
            rows += [
                (run.id, ids["valid/loss"], int(k), BASE_TIME + k * 0.3, 2.6 + 0.05 * i) for k in sv
            ]
            with engine.begin() as conn:
                pending = writer.insert(conn, rows)
            writer.accept(pending)
    engine.dispose()
    marker.write_text(built())


class Sweep:
    """Appends steps to every series of every run of the store (a live sweep's writers)."""

    def __init__(
        self,
        path: Path,
        runs: int,
        steps: int,
        live: int | None = None,
        events: int = 0,
        page: str = "training",
        tokens: bool = False,
    ) -> None:
        """`live`: the runs (oldest first) that get points; the others are marked finished.
        `events`: checkpoint events each live run has logged, spread over its steps.
        `page`, `tokens`: what the store was built with (build_store)."""
        self.page, self.tokens = page, tokens
        self._writers: dict = {}  # run id -> its RollupWriter (add)
        self._key_ids: dict[str, int] = {}
        from schema.store import read
        from schema.store.connect import open_store

        self.engine = open_store(path)
        with self.engine.connect() as conn:
            self.ids = [row_id for row_id, _run in read.list_runs(conn, store=str(path))]
        if live is not None:
            with self.engine.begin() as conn:
                for run_id in self.ids[live:]:
                    conn.exec_driver_sql(
                        "UPDATE runs SET status = 'finished', ended_at = heartbeat_at WHERE id = ?",
                        (run_id,),
                    )
            self.ids = self.ids[:live]
        self.next = steps
        self._beat()
        if events:
            from tests.fixtures.stores import BASE_TIME, add_events

            at = np.linspace(0, steps - 1, events).astype(int)
            for run_id in self.ids:
                specs = [("checkpoint", f"step {k}", int(k)) for k in at]
                add_events(self.engine, run_id, specs, wall0=BASE_TIME)

    def add(self, n: int) -> None:
        """`n` more steps of every series of every live run, each run through its own kept
        rollup writer, as reslog's writer keeps one a run. A writer made at every add compiled
        its SQL again: ~850 objects in reference cycles a poll, whose collection (~1 ms) fell
        in the poll timed next."""
        from schema.store.rollup_writer import RollupWriter
        from tests.fixtures.stores import BASE_TIME, key_id

        s = np.arange(self.next, self.next + n)
        walls = (BASE_TIME + s * 0.3).tolist()
        for i, run_id in enumerate(self.ids):
            writer = self._writers.get(run_id)
            if writer is None:
                writer = self._writers[run_id] = RollupWriter(self.engine.dialect, run_id)
            rows = []
            for key, values in series_values(i, s, self.page, self.tokens).items():
                if key not in self._key_ids:
                    self._key_ids[key] = key_id(self.engine, key)
                kid = self._key_ids[key]
                rows += [
                    (run_id, kid, int(a), w, float(v))
                    for a, w, v in zip(s, walls, values, strict=True)
                ]
            with self.engine.begin() as conn:
                pending = writer.insert(conn, rows)
            writer.accept(pending)
        self._beat()
        self.next += n

    def _beat(self) -> None:
        """The live runs' heartbeat now, as reslog's writer keeps it: without it they read as
        crashed (a heartbeat months old) and the window followed a crashed run that kept
        logging, its crash alert's text ("crashed after step N") new at every poll."""
        from tests.fixtures.stores import heartbeat

        for run_id in self.ids:
            heartbeat(self.engine, run_id)
