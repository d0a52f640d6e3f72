"""The questions an SSH login asks a person, and who answers them.

Three kinds, as OpenSSH has them: a password (`alice@gpu's password: `), keyboard-interactive
rounds (each server prompt shown as sent, typed with or without echo as the server asks: the
usual way of 2FA/OTP), and a key passphrase (`Enter passphrase for key '...': `).

Who answers: the window (a dialog, resplot/ui/prompt_dialog.py), the terminal for CLI commands, or
the `SSH_ASKPASS` program, chosen like OpenSSH chooses (`SSH_ASKPASS_REQUIRE` = never, prefer,
force). `Secrets` keeps the answers of this process in memory so a reconnect does not ask again:
a host's password, the password half of a keyboard-interactive round (never a one-time code), and
unlocked keys. Nothing is written to disk, except into the OS keyring (the optional `keyring`
package) when the person ticks "remember" in the dialog.
"""

from __future__ import annotations

import contextlib
import getpass
import logging
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

log = logging.getLogger(__name__)

KEYRING_SERVICE = "resplot"
Kind = Literal["password", "keyboard-interactive", "passphrase"]


@dataclass(frozen=True)
class Question:
    text: str  # as the server (or ssh) words it
    echo: bool = False  # False: a secret, typed without echo


@dataclass(frozen=True)
class Prompt:
    kind: Kind
    host: str  # user@alias (address), as connection messages name it
    questions: tuple[Question, ...]
    name: str = ""  # keyboard-interactive: the server's name and instructions for the round
    instructions: str = ""
    key_path: str | None = None
    may_remember: bool = False  # an OS keyring is there and the answer is a reusable secret

    @property
    def title(self) -> str:
        if self.kind == "passphrase":
            return f"Passphrase for {self.key_path}"
        return f"Log in to {self.host}"


@dataclass
class Answer:
    values: list[str]
    remember: bool = False  # keep it in the OS keyring (only offered when may_remember)


Asker = Callable[[Prompt], "Answer | None"]  # None: the person cancelled


def keyring_module():
    """The `keyring` package with a usable backend, or None (it is an optional extra)."""
    try:
        import keyring
        from keyring.backends import fail
    except ImportError:
        return None
    with contextlib.suppress(Exception):
        backend = keyring.get_keyring()
        chained = getattr(backend, "backends", None)  # a chainer with nothing in it is none
        if not isinstance(backend, fail.Keyring) and (chained is None or chained):
            return keyring
    return None


# -- who answers ---------------------------------------------------------------------------------
def terminal_asker(prompt: Prompt) -> Answer | None:
    """Ask on the controlling terminal (/dev/tty), like ssh: secrets without echo."""
    try:
        tty = open("/dev/tty", "r+")  # noqa: SIM115 - closed below
    except OSError:
        tty = None
    out = tty or sys.stderr
    try:
        for line in (prompt.name, prompt.instructions):
            if line:
                print(line, file=out, flush=True)
        values = []
        for q in prompt.questions:
            if q.echo:
                out.write(q.text)
                out.flush()
                text = (tty or sys.stdin).readline()
                if not text:
                    return None
                values.append(text.rstrip("\n"))
            else:
                values.append(getpass.getpass(q.text, stream=out))
        return Answer(values)
    except (EOFError, KeyboardInterrupt):
        return None
    finally:
        if tty is not None:
            tty.close()


def askpass_asker(program: str) -> Asker:
    """Ask through an SSH_ASKPASS program: prompt text as its argument, answer on its stdout."""

    def ask(prompt: Prompt) -> Answer | None:
        values = []
        for q in prompt.questions:
            text = "\n".join(t for t in (prompt.name, prompt.instructions, q.text) if t)
            env = {**os.environ}
            if q.echo:
                env["SSH_ASKPASS_PROMPT"] = "none"  # not a secret; OpenSSH's hint is the same
            try:
                done = subprocess.run(
                    [program, text],
                    stdout=subprocess.PIPE,
                    stdin=subprocess.DEVNULL,
                    env=env,
                    timeout=600,
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                log.warning("SSH_ASKPASS %s failed: %s", program, exc)
                return None
            if done.returncode != 0:
                return None
            values.append(done.stdout.decode("utf-8", "replace").rstrip("\r\n"))
        return Answer(values)

    return ask


def default_asker(
    environ: dict[str, str] | None = None, has_tty: bool | None = None
) -> Asker | None:
    """Who answers for a command-line run, by OpenSSH's rules: the terminal when there is one,
    else SSH_ASKPASS when a display is there; SSH_ASKPASS_REQUIRE=prefer puts SSH_ASKPASS first,
    `force` uses it even without a display, `never` never uses it. None: nobody can answer."""
    env = os.environ if environ is None else environ
    if has_tty is None:
        has_tty = _has_tty()
    require = env.get("SSH_ASKPASS_REQUIRE", "").lower()
    program = env.get("SSH_ASKPASS") or shutil.which("ssh-askpass")
    display = bool(env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"))
    if program and (require == "force" or (require == "prefer" and display)):
        return askpass_asker(program)
    if has_tty:
        return terminal_asker
    if program and display and require != "never":
        return askpass_asker(program)
    return None


def _has_tty(platform: str | None = None) -> bool:
    """A terminal to ask on: /dev/tty (POSIX; also when stdin is redirected), or on Windows a
    console on stdin."""
    if (platform or sys.platform) == "win32":
        return sys.stdin is not None and sys.stdin.isatty()
    try:
        with open("/dev/tty"):
            return True
    except OSError:
        return False


# -- asked once per host per session ------------------------------------------------------------
@dataclass
class Secrets:
    """This process's answers, in memory only; one question at a time, whoever asks."""

    asker: Asker | None = None
    _memory: dict[tuple[str, ...], str] = field(default_factory=dict)
    _keys: dict[str, object] = field(default_factory=dict)  # unlocked keys by path
    _lock: threading.Lock = field(default_factory=threading.Lock)
    asked: int = 0  # how many times a person was asked (tests, and the CLI's summary)

    def answer(self, prompt: Prompt, ids: list[tuple[str, ...] | None]) -> list[str] | None:
        """The answers to `prompt`'s questions. `ids[i]` names a reusable secret (kept for the
        session, looked up in the keyring); None means ask every time (a one-time code)."""
        with self._lock:  # a second host waits for the first's dialog, then may find its answer
            known = [self._recall(i) if i is not None else None for i in ids]
            if all(v is not None for v in known):
                return [v for v in known if v is not None]
            if self.asker is None:
                return None
            ring = keyring_module() if any(i is not None for i in ids) else None
            if ring is not None:
                prompt = _with_remember(prompt)
            self.asked += 1
            answer = self.asker(prompt)
            if answer is None or len(answer.values) != len(prompt.questions):
                return None
            for i, value in zip(ids, answer.values, strict=True):
                if i is None:
                    continue
                self._memory[i] = value
                if answer.remember and ring is not None:
                    with contextlib.suppress(Exception):  # a locked keyring: kept in memory only
                        ring.set_password(KEYRING_SERVICE, "|".join(i), value)
            return list(answer.values)

    def _recall(self, ident: tuple[str, ...]) -> str | None:
        if ident in self._memory:
            return self._memory[ident]
        ring = keyring_module()
        if ring is None:
            return None
        with contextlib.suppress(Exception):
            value = ring.get_password(KEYRING_SERVICE, "|".join(ident))
            if value is not None:
                self._memory[ident] = value
                return value
        return None

    def forget(self, ident: tuple[str, ...]) -> None:
        """A refused secret: drop it here and from the keyring, so the next try asks."""
        with self._lock:
            self._memory.pop(ident, None)
            ring = keyring_module()
            if ring is not None:
                with contextlib.suppress(Exception):
                    ring.delete_password(KEYRING_SERVICE, "|".join(ident))

    def unlocked_key(self, path: str):
        return self._keys.get(path)

    def keep_key(self, path: str, key: object) -> None:
        self._keys[path] = key


def _with_remember(prompt: Prompt) -> Prompt:
    from dataclasses import replace

    return replace(prompt, may_remember=True)
