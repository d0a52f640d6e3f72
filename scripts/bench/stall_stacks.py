"""What the GUI thread is doing while the event loop stalls: a thread samples the main thread's
stack every SAMPLE_S while the window's 10 ms tick is overdue by more than LATE_S, and counts
the samples by where they were (bench_soak.py --stacks).

A sample is named by the frames of this project (resplot/, schema/, reslog/) from the outermost
in, and the innermost frame below them (a matplotlib or Qt call): "what of ours asked for it,
and what it was waiting on". Each sample stands for SAMPLE_S of stall.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from pathlib import Path

SAMPLE_S = 0.05
LATE_S = 0.25
OURS = ("resplot", "schema", "reslog")


class StallSampler(threading.Thread):
    def __init__(self, root: Path, label=lambda: "") -> None:
        """`label`: what the GUI thread was last asked to do (the soak's last action)."""
        super().__init__(daemon=True, name="stall-sampler")
        self.root, self.label = str(root), label
        self.main = threading.main_thread().ident
        self.last_tick = time.monotonic()  # the GUI thread sets it from its tick
        self.samples: Counter[tuple[str, ...]] = Counter()
        self._done = threading.Event()

    def tick(self) -> None:
        self.last_tick = time.monotonic()

    def stop(self) -> None:
        self._done.set()

    def run(self) -> None:
        while not self._done.wait(SAMPLE_S):
            if time.monotonic() - self.last_tick < LATE_S:
                continue
            frame = sys._current_frames().get(self.main)
            if frame is not None:
                self.samples[(f"<{self.label()}>", *self._where(frame))] += 1
            # Not held over the wait: a frame kept alive keeps its locals, and a QPainter of
            # a paintEvent that returned meanwhile then outlived its paint ("endPaint() called
            # with active painter", 109 times in a 6-minute soak).
            del frame

    def _where(self, frame) -> tuple[str, ...]:
        ours: list[str] = []
        inner = None
        while frame is not None:
            code = frame.f_code
            path = code.co_filename
            if path.startswith(self.root) and Path(path).parts[len(Path(self.root).parts)] in OURS:
                where = f"{Path(path).relative_to(self.root)}:{code.co_name}"
                if not ours or ours[-1] != where:
                    ours.append(where)
            elif not ours and inner is None:
                inner = f"{Path(path).name}:{code.co_name}"
            frame = frame.f_back
        ours.reverse()  # outermost first
        return (*ours, f"[{inner}]" if inner else "[ours]")

    def report(self, top: int = 15) -> str:
        total = sum(self.samples.values())
        late = f"{LATE_S * 1e3:.0f} ms"
        lines = [f"stalled samples: {total} ({total * SAMPLE_S:.1f} s of ticks late over {late})"]
        # By the action and the outermost three of our frames: where the stall came from.
        heads: Counter[tuple[str, ...]] = Counter()
        for stack, n in self.samples.items():
            heads[stack[:4]] += n
        lines.append("by where it began (our outermost frames):")
        for stack, n in heads.most_common(top):
            lines.append(f"  {n * SAMPLE_S:6.1f} s  {' > '.join(stack)}")
        # By the innermost: what the time was spent in.
        tails: Counter[tuple[str, ...]] = Counter()
        for stack, n in self.samples.items():
            tails[stack[-3:]] += n
        lines.append("by where it was spent (our innermost frames, then the call below):")
        for stack, n in tails.most_common(top):
            lines.append(f"  {n * SAMPLE_S:6.1f} s  {' > '.join(stack)}")
        return "\n".join(lines)
