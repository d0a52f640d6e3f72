"""How runs end when nobody calls finish(): normal exit, uncaught exception, signals, fork.

Installed once, on the first init(). Every hook chains to what was there before it, and each
finish it triggers has a hard time limit, so a wedged disk or server never hangs the exit.

- normal interpreter exit (atexit)       → finished (killed after a Ctrl+C that was caught)
- sys.exit(code) from the main thread     → failed when code is not 0/None (as wandb's exit
                                            hooks; a bare `raise SystemExit(1)` is not seen)
- uncaught exception (sys.excepthook)    → failed; KeyboardInterrupt → killed
- exception in the thread that called init() when that is not the main thread → failed
- SIGTERM / SIGHUP                        → killed, then the previous handler or the default
                                            action (the process dies of the same signal)
- SIGINT                                  → noted, then the previous handler (KeyboardInterrupt)
- fork: the child's copy of a run goes inert (it has no writer thread; the parent owns the run);
  it stays the child's current run, so `reslog.log` there warns once instead of raising
- SIGKILL / OOM kill: nothing can run; readers see a stale heartbeat as "crashed"
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import traceback
from types import FrameType
from typing import Any, Protocol

from schema.store.status import FAILED, KILLED


class Hooks(Protocol):
    """What this module calls on a registered run (reslog.training.run.RunHooks implements it).
    `run` is what `current()` hands out."""

    run: Any

    def on_exit(self, status: str | None, error: BaseException | None, reason: str) -> None:
        """The process is ending (or the run's thread died): finish with this status."""

    def on_thread_exception(self, args: threading.ExceptHookArgs) -> None: ...

    def on_interrupt(self) -> None:
        """A Ctrl+C arrived: a later normal finish means "killed"."""

    def on_fork_child(self) -> None:
        """In a forked child: the copy must neither write nor finish."""


_active: list[Hooks] = []
_lock = threading.Lock()
_installed = False
_previous_signal: dict[int, Any] = {}
_previous_excepthook = sys.excepthook
_previous_threading_hook = threading.excepthook
_previous_exit = sys.exit
_exit_code: Any = None
KILL_SIGNALS = ("SIGTERM", "SIGHUP")


def register(hooks: Hooks) -> None:
    with _lock:
        _active.append(hooks)
    _install()


def unregister(run: Any) -> None:
    with _lock:
        _active[:] = [h for h in _active if h.run is not run]


def active() -> list[Hooks]:
    with _lock:
        return list(_active)


def current() -> Any:
    """The most recently started run that has not finished (None: there is none)."""
    with _lock:
        return _active[-1].run if _active else None


def _finish_all(status: str | None, error: BaseException | None = None, reason: str = "") -> None:
    for hooks in reversed(active()):
        try:
            hooks.on_exit(status, error, reason)
        except Exception:  # an exit hook must never raise
            traceback.print_exc()


def exit_failure(code: Any) -> str | None:
    """Why sys.exit(code) means failure ("sys.exit(3): exit status 3"); None for a clean exit."""
    if code is None or code == 0:
        return None
    # sys.exit("message") exits with status 1, like any non-integer code.
    status = code if isinstance(code, int) else 1
    return f"sys.exit({code!r}): exit status {status}"


def _at_exit() -> None:
    reason = exit_failure(_exit_code)
    if reason is None:
        _finish_all(None)
    else:
        _finish_all(FAILED, reason=reason)


def _exit(code: Any = None) -> None:
    global _exit_code
    if threading.current_thread() is threading.main_thread():
        _exit_code = code  # in another thread SystemExit only ends that thread
    _previous_exit(code)


def _excepthook(tp, value, tb) -> None:
    # The traceback first, so the user sees the error even if the store is slow.
    _previous_excepthook(tp, value, tb)
    _finish_all(KILLED if issubclass(tp, KeyboardInterrupt) else FAILED, value)


def _threading_hook(args) -> None:
    _previous_threading_hook(args)
    if args.exc_type is SystemExit:
        return
    for hooks in active():
        try:
            hooks.on_thread_exception(args)
        except Exception:
            traceback.print_exc()


def _on_kill_signal(signum: int, frame: FrameType | None) -> None:
    _finish_all(KILLED, reason=f"received {signal.Signals(signum).name}")
    previous = _previous_signal.get(signum, signal.SIG_DFL)
    if callable(previous):
        previous(signum, frame)
    elif previous == signal.SIG_IGN:
        return
    else:  # default action: die of the same signal, so the parent sees the usual exit status
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    for hooks in active():
        hooks.on_interrupt()
    previous = _previous_signal.get(signum, signal.default_int_handler)
    if callable(previous):
        previous(signum, frame)
    elif previous != signal.SIG_IGN:
        _on_kill_signal(signum, frame)


def _after_fork_in_child() -> None:
    # The copies stay registered: `reslog.log` in the child reaches an inert run (one warning,
    # nothing written) rather than raising "no active run", and at the child's exit their
    # hooks find them finished already.
    global _lock
    _lock = threading.Lock()  # another thread of the parent may have held it at the fork
    for hooks in _active:
        hooks.on_fork_child()


def _install() -> None:
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
    atexit.register(_at_exit)
    _chain_hooks()
    os.register_at_fork(after_in_child=_after_fork_in_child)
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be set from the main thread
    for name in KILL_SIGNALS:
        signum = getattr(signal, name, None)
        if signum is not None:
            _chain_signal(signum, _on_kill_signal)
    _chain_signal(signal.SIGINT, _on_sigint)


def _chain_hooks() -> None:
    global _previous_excepthook, _previous_threading_hook, _previous_exit
    if sys.exit is not _exit:
        _previous_exit = sys.exit
        sys.exit = _exit
    if sys.excepthook is not _excepthook:
        _previous_excepthook = sys.excepthook
        sys.excepthook = _excepthook
    if threading.excepthook is not _threading_hook:
        _previous_threading_hook = threading.excepthook
        threading.excepthook = _threading_hook


def _chain_signal(signum: int, handler) -> None:
    try:
        previous = signal.getsignal(signum)
    except (ValueError, OSError):
        return
    if previous == signal.SIG_IGN or previous is handler:
        return  # ignored on purpose (nohup): stay ignored
    _previous_signal[signum] = previous
    try:
        signal.signal(signum, handler)
    except (ValueError, OSError):
        _previous_signal.pop(signum, None)
