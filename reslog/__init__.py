"""reslog: log training metrics into a local SQLite store (or PostgreSQL) without slowing training.

    import reslog
    run = reslog.init(project="z2all", name="wsd-0.5", config=cfg)
    run.log({"train/loss": loss, "train/lr": lr}, step=step)
    run.finish()

    with reslog.open("runs/reslog.db") as store:    # read it back: DataFrames, O(samples)
        store.history("wsd-0.5", "train/loss", samples=1000)

`import reslog as wandb` works for the wandb calls training code uses: `reslog.run`,
`reslog.config` and `reslog.summary` are the current run's (None without one).
The API reference and the semantics (steps, NaN, statuses, crashes, DDP) are in docs/reslog.md.
Importing this package is light: no torch, numpy, pandas or NVML.
"""

from __future__ import annotations

import functools
import importlib
import sys
from typing import TYPE_CHECKING, Any

from reslog.training import disabled
from reslog.training.lifecycle import current
from schema.store.errors import RunInUse, StoreError

if TYPE_CHECKING:
    from reslog import plot, util
    from reslog.reader import Reader, open
    from reslog.training import start  # noqa: F401 - reslog.start, loaded on first use
    from reslog.training.artifacts import Artifact
    from reslog.training.config import Config
    from reslog.training.disabled import DisabledRun
    from reslog.training.media import (
        AlertLevel,
        Audio,
        Histogram,
        Html,
        Image,
        Settings,
        Table,
        Video,
    )
    from reslog.training.run import Run, Timer

# Loaded on first use (PEP 562): the writer and the reader need SQLAlchemy, and the `reslog`
# command's read-only fast path imports this package, which must start in milliseconds next to
# busy training processes (docs/cli.md, "Reading while training writes").
_LAZY = {
    "Reader": ("reslog.reader", "Reader"),
    "open": ("reslog.reader", "open"),
    "Run": ("reslog.training.run", "Run"),
    "Timer": ("reslog.training.run", "Timer"),
    "start": ("reslog.training.start", None),
    "plot": ("reslog.plot", None),
    "util": ("reslog.util", None),
    "Artifact": ("reslog.training.artifacts", "Artifact"),
    "Config": ("reslog.training.config", "Config"),
    "DisabledRun": ("reslog.training.disabled", "DisabledRun"),
    **{
        name: ("reslog.training.media", name)
        for name in (
            "AlertLevel",
            "Audio",
            "Histogram",
            "Html",
            "Image",
            "Settings",
            "Table",
            "Video",
        )
    },
}

__all__ = [
    "AlertLevel",
    "Artifact",
    "Audio",
    "Config",
    "DisabledRun",
    "Histogram",
    "Html",
    "Image",
    "Reader",
    "Run",
    "RunInUse",
    "Settings",
    "StoreError",
    "Table",
    "Timer",
    "Video",
    "alert",
    "current",
    "define_metric",
    "finish",
    "init",
    "log",
    "log_artifact",
    "login",
    "mark_preempting",
    "open",
    "plot",
    "save",
    "termerror",
    "termlog",
    "termwarn",
    "unwatch",
    "util",
    "watch",
]


def _make_init() -> Any:
    from reslog.training import start
    from reslog.training.run import Run

    @functools.wraps(start.init)
    def init(
        *args: Any, sync_tensorboard: bool | None = None, tensorboard: Any = None, **kwargs: Any
    ) -> Run | DisabledRun:
        """Start (or with resume=uid, or id= and resume=, continue) a run and make it the
        current one (reslog.training.start.init). wandb's keywords are accepted (docs/reslog.md,
        "Coming from wandb"); `sync_tensorboard=True` (wandb's older `tensorboard=True`) also
        logs what this process's TensorBoard writers write (reslog.integrations.tensorboard)."""
        run = start.init(*args, **kwargs)
        if (sync_tensorboard or tensorboard) and isinstance(run, Run):
            from reslog.integrations.tensorboard import sync

            sync(run)
        return run

    return init


# wandb's module-level functions that act on the current run: each is the `Run` method of that
# name (its signature and docstring), made on first use like `init` since `Run` needs SQLAlchemy.
_FORWARDED = ("log", "define_metric", "watch", "unwatch", "save", "log_artifact", "mark_preempting")


def _forwarder(name: str) -> Any:
    import inspect

    from reslog.training.run import Run

    method = getattr(Run, name)

    @functools.wraps(method)
    def forward(*args: Any, **kwargs: Any) -> Any:
        return getattr(_current_or_raise(), name)(*args, **kwargs)

    signature = inspect.signature(method)
    forward.__signature__ = signature.replace(parameters=list(signature.parameters.values())[1:])
    forward.__qualname__ = forward.__name__ = name
    forward.__module__ = __name__
    doc = inspect.cleandoc(method.__doc__ or "")
    forward.__doc__ = (
        f"run.{name} on the current run (the most recent unfinished `reslog.init()`); "
        "RuntimeError without one." + (f"\n\n{doc}" if doc else "")
    )
    return forward


def _active() -> Run | DisabledRun | None:
    """The current run: the most recent unfinished init(), a disabled one included."""
    return current() or disabled.current()


def __getattr__(name: str) -> Any:
    # PEP 562: wandb's module attributes, looked up on each access (None without a run).
    if name == "run":
        return _active()
    if name in ("config", "summary"):
        run = _active()
        return None if run is None else getattr(run, name)
    if name == "__version__":
        return _version()
    if name == "init":
        value = globals()["init"] = _make_init()
        return value
    if name in _FORWARDED:
        value = globals()[name] = _forwarder(name)
        return value
    if name in _LAZY:
        module, attr = _LAZY[name]
        loaded = importlib.import_module(module)
        value = globals()[name] = loaded if attr is None else getattr(loaded, attr)
        return value
    raise AttributeError(f"module 'reslog' has no attribute {name!r}")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("reslog")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


def _current_or_raise() -> Run | DisabledRun:
    run = _active()
    if run is None:
        raise RuntimeError("reslog: no active run; call reslog.init(...) first")
    return run


def finish(
    status: str | None = None,
    timeout: float | None = None,
    *,
    exit_code: int | None = None,
    quiet: bool | None = None,
) -> bool:
    """Finish the current run; True when there was none left to finish or it finished in time."""
    run = _active()
    if run is None:
        return True
    return run.finish(status, timeout=timeout, exit_code=exit_code, quiet=quiet)


def alert(title: str, text: str = "", level: Any = "warning", wait_duration: Any = None) -> None:
    """wandb.alert(title, text, level) on the current run."""
    _current_or_raise().alert(title, level=level, text=text)


def termlog(string: str = "", newline: bool = True, repeat: bool = True) -> None:
    """wandb.termlog (Hugging Face's WandbCallback prints through it): to stderr."""
    print(f"reslog: {string}", end="\n" if newline else "", file=sys.stderr)


def termwarn(string: str, repeat: bool = True) -> None:
    print(f"reslog: warning: {string}", file=sys.stderr)


def termerror(string: str, repeat: bool = True) -> None:
    print(f"reslog: error: {string}", file=sys.stderr)


def login(key: str | None = None, relogin: bool | None = None, **kw: Any) -> bool:
    """wandb.login: there is no server to log in to; says so once and returns True."""
    from reslog.training.artifacts import say_once

    say_once(
        "login",
        "login() does nothing: runs are written to a local store (init(store=...)), with no "
        "account or server",
    )
    return True


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY, *_FORWARDED, "init"})
