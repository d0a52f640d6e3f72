"""`reslog.init(sync_tensorboard=True)`: what TensorBoard writers in this process write also goes
into the run, as it is written (wandb's `sync_tensorboard`).

Every event a `torch.utils.tensorboard.SummaryWriter` (tensorboard's own `EventFileWriter`) or a
`tensorboardX.SummaryWriter` adds is read, as it is added, by the same parser as `reslog import
tensorboard` (reslog.tools.importers.tensorboard): its scalars are logged into the run under
their tags at their own steps and wall times (the run's own step counter is not touched),
`add_hparams` values join the run's config, and images, histograms, text and other non-scalar
values are counted and listed at finish() in one `skipped` event, by tag and kind. The event
files are written as before. TensorFlow's own writers (`tf.summary`, Keras' TensorBoard
callback) write from C++ and are not seen: import their folder afterwards with `reslog import
tensorboard LOGDIR`, which appends what is new on each run.
"""

from __future__ import annotations

import importlib
import importlib.util
import threading
import warnings
from typing import Any

from reslog.tools.importers.tensorboard import read_event
from reslog.training.artifacts import say_once
from reslog.training.run import Run

# (module, class) of the Python TensorBoard writers whose add_event is wrapped.
WRITERS = (
    ("tensorboard.summary.writer.event_file_writer", "EventFileWriter"),
    ("tensorboardX.event_file_writer", "EventFileWriter"),
)

_lock = threading.Lock()
_syncs: list[_Sync] = []
_originals: dict[type, Any] = {}


class _Sync:
    """One run's TensorBoard sync: values to the run, skipped values counted."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.skipped: dict[tuple[str, str], int] = {}
        self.failed = False

    def feed(self, record: bytes) -> None:
        by_step: dict[tuple[int, float], dict[str, float]] = {}

        def add(tag: str, step: int, wall: float, value: float) -> None:
            by_step.setdefault((step, wall), {})[tag] = value

        def skip(tag: str, kind: str) -> None:
            self.skipped[(tag, kind)] = self.skipped.get((tag, kind), 0) + 1

        read_event(record, add, skip, self.run.config.update)
        for (step, wall), values in by_step.items():
            try:
                self.run._emit_at(step, wall, values)
            except (TypeError, ValueError) as exc:
                say_once(f"tb-value:{exc}", f"sync_tensorboard: not logged: {exc}")

    def end(self) -> None:
        """At the run's finish: stop feeding it; the skipped values as one event."""
        with _lock:
            if self in _syncs:
                _syncs.remove(self)
        if not self.skipped:
            return
        total = sum(self.skipped.values())
        body = "\n".join(f"{t} ({k}): {n}" for (t, k), n in sorted(self.skipped.items()))
        title = f"TensorBoard sync: {total} non-scalar values not logged ({len(self.skipped)} tags)"
        self.run.event("skipped", title, body=body, level="warning")


def sync(run: Run) -> bool:
    """Feed `run` what this process's TensorBoard writers write, until it finishes. False (said
    once) when no TensorBoard writer package is installed."""
    classes = _writer_classes()
    if not classes:
        say_once(
            "tb-missing",
            "init(sync_tensorboard=True): neither tensorboard nor tensorboardX is installed, so "
            "there is no writer to follow; nothing is synced",
        )
        return False
    for cls in classes:
        _wrap(cls)
    state = _Sync(run)
    with _lock:
        _syncs.append(state)
    run._finish_hooks.append(state.end)
    return True


def _writer_classes() -> list[type]:
    found = []
    for module, name in WRITERS:
        if importlib.util.find_spec(module.split(".", 1)[0]) is None:
            continue
        try:
            found.append(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError):
            continue
    return found


def _wrap(cls: type) -> None:
    with _lock:
        if cls in _originals:
            return
        original = _originals[cls] = cls.add_event

    def add_event(self: Any, event: Any, *args: Any, **kwargs: Any) -> Any:
        out = original(self, event, *args, **kwargs)
        with _lock:
            state = _syncs[-1] if _syncs else None
        if state is not None:
            try:
                state.feed(event.SerializeToString())
            except Exception as exc:  # TensorBoard's own write went through; never raise here
                if not state.failed:
                    state.failed = True
                    warnings.warn(
                        f"reslog: sync_tensorboard: an event could not be read ({exc!r}); "
                        "the event file has it (reslog import tensorboard)",
                        RuntimeWarning,
                        stacklevel=2,
                    )
        return out

    add_event.__wrapped__ = original  # type: ignore[attr-defined]
    cls.add_event = add_event
