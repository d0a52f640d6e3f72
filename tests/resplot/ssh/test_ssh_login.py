"""Logins that need a person: passwords, keyboard-interactive (2FA), key passphrases, against
a real sshd with PAM and throwaway users (tests/fixtures/logins.py).

Who answers is resplot's `Asker` interface; here a function standing in for the person at the
keyboard records each prompt and answers it (the dialog, terminal and SSH_ASKPASS askers are
tested on their own below, SSH_ASKPASS with a real program)."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import pytest

from resplot.ssh.connection import AuthFailed, SSHConnection
from resplot.ssh.options import SSHOptions
from resplot.ssh.prompts import Answer, Prompt, Secrets, askpass_asker, default_asker
from tests.fixtures import logins as login_fixtures

login_server = login_fixtures.login_server


class Person:
    """Answers prompts from a script of answers, in order; records what it was asked."""

    def __init__(self, *answers: str | None) -> None:
        self.answers = list(answers)
        self.prompts: list[Prompt] = []

    def __call__(self, prompt: Prompt) -> Answer | None:
        self.prompts.append(prompt)
        value = self.answers.pop(0) if self.answers else None
        return None if value is None else Answer([value] * len(prompt.questions))


@pytest.fixture(autouse=True)
def _no_agent(monkeypatch):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)


def whoami(conn: SSHConnection) -> str:
    return conn.exec("id -un")[1].decode().strip()


def test_a_password_login_asks_like_ssh_and_logs_in(login_server, tmp_path):
    cfg = login_server.ssh_config(tmp_path, extra="Host pw\n  PreferredAuthentications password\n")
    person = Person(login_server.password)
    with SSHConnection("pw", SSHOptions(ssh_config=cfg, secrets=Secrets(person))) as conn:
        assert whoami(conn) == login_server.password_user
    (prompt,) = person.prompts
    assert prompt.kind == "password"
    assert prompt.questions[0].text == f"{login_server.password_user}@127.0.0.1's password: "
    assert prompt.questions[0].echo is False


def test_the_password_is_asked_once_per_host_per_session(login_server, tmp_path):
    cfg = login_server.ssh_config(tmp_path, extra="Host pw\n  PreferredAuthentications password\n")
    person = Person(login_server.password)
    secrets = Secrets(person)
    conn = SSHConnection("pw", SSHOptions(ssh_config=cfg, secrets=secrets))
    with conn:
        assert whoami(conn) == login_server.password_user
    with conn:  # a reconnect
        assert whoami(conn) == login_server.password_user
    with SSHConnection(
        "pw", SSHOptions(ssh_config=cfg, secrets=secrets)
    ) as other:  # a second source
        assert whoami(other) == login_server.password_user
    assert len(person.prompts) == 1 and secrets.asked == 1


def test_a_wrong_password_is_asked_again_and_forgotten(login_server, tmp_path):
    cfg = login_server.ssh_config(tmp_path, extra="Host pw\n  PreferredAuthentications password\n")
    person = Person("wrong", login_server.password)
    with SSHConnection("pw", SSHOptions(ssh_config=cfg, secrets=Secrets(person))) as conn:
        assert whoami(conn) == login_server.password_user
    assert len(person.prompts) == 2


def test_keyboard_interactive_shows_the_server_prompt_as_sent(login_server, tmp_path):
    cfg = login_server.ssh_config(tmp_path)  # default order: keyboard-interactive first
    person = Person(login_server.password)
    with SSHConnection("pw", SSHOptions(ssh_config=cfg, secrets=Secrets(person))) as conn:
        assert whoami(conn) == login_server.password_user
    (prompt,) = person.prompts
    assert prompt.kind == "keyboard-interactive"
    assert [(q.text, q.echo) for q in prompt.questions] == [("Password: ", False)]  # PAM's


def test_a_key_then_a_second_factor_logs_in_asking_only_the_second(login_server, tmp_path):
    cfg = login_server.ssh_config(tmp_path)
    person = Person(login_server.password)
    with SSHConnection("twofa", SSHOptions(ssh_config=cfg, secrets=Secrets(person))) as conn:
        assert whoami(conn) == login_server.twofa_user
    assert [p.kind for p in person.prompts] == ["keyboard-interactive"]
    log = login_server.server.log_text()
    assert f"Partial publickey for {login_server.twofa_user}" in log
    assert f"Accepted keyboard-interactive/pam for {login_server.twofa_user}" in log


def test_with_nobody_to_ask_the_error_says_how_to_answer(login_server, tmp_path):
    cfg = login_server.ssh_config(tmp_path)
    with pytest.raises(AuthFailed) as info:
        SSHConnection("pw", SSHOptions(ssh_config=cfg)).open()
    text = str(info.value)
    assert "nobody to ask" in text and "SSH_ASKPASS" in text and "terminal" in text


def test_batch_mode_asks_nothing(login_server, tmp_path):
    cfg = login_server.ssh_config(tmp_path, extra="Host pw\n  BatchMode yes\n")
    person = Person(login_server.password)
    with pytest.raises(AuthFailed, match="BatchMode yes"):
        SSHConnection("pw", SSHOptions(ssh_config=cfg, secrets=Secrets(person))).open()
    assert person.prompts == []


def test_cancelling_the_prompt_stops_the_login(login_server, tmp_path):
    cfg = login_server.ssh_config(tmp_path)
    person = Person(None)
    with pytest.raises(AuthFailed, match="cancelled"):
        SSHConnection("pw", SSHOptions(ssh_config=cfg, secrets=Secrets(person))).open()
    assert len(person.prompts) == 1


def test_ssh_askpass_answers_when_required(login_server, tmp_path):
    seen = tmp_path / "askpass-prompts"
    program = tmp_path / "askpass"
    program.write_text(
        f"#!/bin/sh\nprintf '%s\\n' \"$1\" >> {seen}\nprintf '%s\\n' '{login_server.password}'\n"
    )
    program.chmod(0o755)
    env = {"SSH_ASKPASS": str(program), "SSH_ASKPASS_REQUIRE": "force"}
    asker = default_asker(env, has_tty=True)
    assert asker is not None
    cfg = login_server.ssh_config(tmp_path, extra="Host pw\n  PreferredAuthentications password\n")
    with SSHConnection("pw", SSHOptions(ssh_config=cfg, secrets=Secrets(asker))) as conn:
        assert whoami(conn) == login_server.password_user
    assert seen.read_text() == f"{login_server.password_user}@127.0.0.1's password: \n"


def test_a_failing_askpass_program_counts_as_cancelled(tmp_path):
    program = tmp_path / "no"
    program.write_text("#!/bin/sh\nexit 1\n")
    program.chmod(0o755)
    from resplot.ssh.prompts import Question

    ask = askpass_asker(str(program))
    assert ask(Prompt("password", "h", (Question("Password: "),))) is None


@pytest.mark.parametrize(
    ("env", "tty", "expected"),
    [
        ({}, True, "terminal"),
        ({}, False, None),
        ({"SSH_ASKPASS": "/bin/true", "DISPLAY": ":0"}, True, "terminal"),
        ({"SSH_ASKPASS": "/bin/true", "DISPLAY": ":0"}, False, "askpass"),
        ({"SSH_ASKPASS": "/bin/true"}, False, None),  # no display: ssh does not use it either
        (
            {"SSH_ASKPASS": "/bin/true", "DISPLAY": ":0", "SSH_ASKPASS_REQUIRE": "prefer"},
            True,
            "askpass",
        ),
        ({"SSH_ASKPASS": "/bin/true", "SSH_ASKPASS_REQUIRE": "force"}, False, "askpass"),
        (
            {"SSH_ASKPASS": "/bin/true", "DISPLAY": ":0", "SSH_ASKPASS_REQUIRE": "never"},
            False,
            None,
        ),
    ],
)
def test_who_answers_follows_openssh_rules(env, tty, expected, monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: None)  # no ssh-askpass on PATH here
    from resplot.ssh.prompts import terminal_asker

    asker = default_asker(env, has_tty=tty)
    if expected is None:
        assert asker is None
    elif expected == "terminal":
        assert asker is terminal_asker
    else:
        assert asker is not None and asker is not terminal_asker


def test_an_encrypted_key_is_asked_for_once_and_an_unasked_one_suggests_ssh_add(
    login_server, tmp_path
):
    from cryptography.hazmat.primitives import serialization

    plain = serialization.load_ssh_private_key(login_server.client_key.read_bytes(), None)
    locked = tmp_path / "locked"
    locked.write_bytes(
        plain.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.BestAvailableEncryption(b"open sesame"),
        )
    )
    locked.chmod(0o600)
    extra = f"Host twofa\n  IdentityFile {locked}\n  IdentitiesOnly yes\n"
    cfg = login_server.ssh_config(tmp_path / "ssh", extra=extra)
    with pytest.raises(AuthFailed) as info:
        SSHConnection("twofa", SSHOptions(ssh_config=cfg)).open()
    assert f"ssh-add {locked}" in str(info.value)

    def person(prompt: Prompt) -> Answer | None:
        asked.append(prompt)
        return Answer(["open sesame" if prompt.kind == "passphrase" else login_server.password])

    asked: list[Prompt] = []
    secrets = Secrets(person)
    for _ in range(2):  # two connections, one passphrase question
        with SSHConnection("twofa", SSHOptions(ssh_config=cfg, secrets=secrets)) as conn:
            assert whoami(conn) == login_server.twofa_user
    kinds = [p.kind for p in asked]
    assert kinds.count("passphrase") == 1
    assert asked[0].questions[0].text == f"Enter passphrase for key '{locked}': "


def test_resplot_export_logs_in_with_a_password_through_ssh_askpass(
    login_server, tmp_path, monkeypatch, capsys
):
    from resplot.cli import main
    from tests.fixtures.stores import make_run, new_store

    home = login_server.home(login_server.password_user)
    store = home / "runs.db"
    engine = new_store(store)
    make_run(
        engine, name="remote-run", points={"train/loss": [(s, 1.0 / (s + 1)) for s in range(5)]}
    )
    engine.dispose()
    for path in (store, *store.parent.glob("runs.db*")):
        os.chown(path, *_ids(login_server.password_user))
    program = tmp_path / "askpass"
    program.write_text(f"#!/bin/sh\nprintf '%s\\n' '{login_server.password}'\n")
    program.chmod(0o755)
    monkeypatch.setenv("SSH_ASKPASS", str(program))
    monkeypatch.setenv("SSH_ASKPASS_REQUIRE", "force")
    cfg = login_server.ssh_config(tmp_path / "ssh")
    out = tmp_path / "points.csv"
    spec = "pw:runs.db#python=/usr/bin/python3"
    assert main(["export", spec, "--ssh-config", str(cfg), "--format", "csv", "-o", str(out)]) == 0
    assert "remote-run" in out.read_text()


def _ids(user: str) -> tuple[int, int]:
    import pwd

    entry = pwd.getpwnam(user)
    return entry.pw_uid, entry.pw_gid


def test_the_login_dialog_shows_each_question_with_its_echo(qtbot):
    from PyQt5.QtWidgets import QLineEdit

    from resplot.ssh.prompts import Question
    from resplot.ui.prompt_dialog import LoginDialog, PromptAsker

    prompt = Prompt(
        "keyboard-interactive",
        "me@gpu",
        (Question("Password: "), Question("Token: ", True)),
        name="Duo two-factor",
        instructions="Enter the code from your phone",
    )

    def fill(dialog: LoginDialog) -> bool:
        qtbot.addWidget(dialog)
        dialog.fields[0].setText("secret")
        dialog.fields[1].setText("123456")
        return True

    asker = PromptAsker(answer=fill)
    answer = asker(prompt)
    assert answer is not None and answer.values == ["secret", "123456"]
    (dialog,) = asker.shown
    assert [f.echoMode() for f in dialog.fields] == [QLineEdit.Password, QLineEdit.Normal]
    assert not dialog.remember.isVisibleTo(dialog)  # no keyring here: nothing to remember in


def test_the_window_s_asker_is_usable_from_a_worker_thread(qtbot):
    import threading

    from resplot.ssh.prompts import Question
    from resplot.ui.prompt_dialog import PromptAsker

    asker = PromptAsker(answer=lambda dialog: (dialog.fields[0].setText("pw"), True)[1])
    got: list[Answer | None] = []
    worker = threading.Thread(
        target=lambda: got.append(asker(Prompt("password", "h", (Question("Password: "),))))
    )
    worker.start()
    qtbot.waitUntil(lambda: bool(got), timeout=10_000)
    worker.join()
    assert got[0] is not None and got[0].values == ["pw"]


if sys.platform == "win32":  # pragma: no cover - the fixture creates POSIX users
    pytestmark = pytest.mark.skip("POSIX only")


class _MemoryKeyring:
    """Stands in for the OS keyring (Secret Service, macOS Keychain, Windows Credential
    Locker), none of which runs on a test machine; `keyring` itself is real."""

    def __init__(self) -> None:
        import keyring.backend

        class Backend(keyring.backend.KeyringBackend):
            priority = 1  # type: ignore[assignment]

            def __init__(self) -> None:
                super().__init__()
                self.store: dict[tuple[str, str], str] = {}

            def get_password(self, service, username):
                return self.store.get((service, username))

            def set_password(self, service, username, password):
                self.store[(service, username)] = password

            def delete_password(self, service, username):
                self.store.pop((service, username), None)

        self.backend = Backend()


@pytest.fixture
def os_keyring():
    import keyring  # the `keyring` extra (in `all`, which the test setup installs)

    previous = keyring.get_keyring()
    memory = _MemoryKeyring().backend
    memory.store.clear()
    keyring.set_keyring(memory)
    yield memory
    keyring.set_keyring(previous)


def test_remember_keeps_the_password_in_the_os_keyring_for_the_next_session(
    login_server, tmp_path, os_keyring
):
    cfg = login_server.ssh_config(tmp_path, extra="Host pw\n  PreferredAuthentications password\n")
    asked: list[Prompt] = []

    def ticks_remember(prompt: Prompt) -> Answer:
        asked.append(prompt)
        return Answer([login_server.password], remember=True)

    with SSHConnection("pw", SSHOptions(ssh_config=cfg, secrets=Secrets(ticks_remember))) as conn:
        assert whoami(conn) == login_server.password_user
    assert asked[0].may_remember
    assert list(os_keyring.store.values()) == [login_server.password]
    nobody = Secrets(None)  # a new session with nobody to ask: the keyring answers
    with SSHConnection("pw", SSHOptions(ssh_config=cfg, secrets=nobody)) as conn:
        assert whoami(conn) == login_server.password_user
    assert nobody.asked == 0


def test_a_remembered_password_that_is_refused_is_dropped_from_the_keyring(
    login_server, tmp_path, os_keyring
):
    cfg = login_server.ssh_config(tmp_path, extra="Host pw\n  PreferredAuthentications password\n")
    ident = ("password", login_server.password_user, "127.0.0.1", str(login_server.server.port))
    os_keyring.store[("resplot", "|".join((*ident, "")))] = "an old password"
    person = Person(login_server.password)
    with SSHConnection("pw", SSHOptions(ssh_config=cfg, secrets=Secrets(person))) as conn:
        assert whoami(conn) == login_server.password_user
    assert len(person.prompts) == 1 and os_keyring.store == {}


@pytest.mark.integration
def test_the_terminal_asks_secrets_without_echo_and_the_rest_with_it(tmp_path):
    """terminal_asker in a child process whose controlling terminal is a real pty."""
    import json
    import pty
    import select
    import subprocess

    master, slave = pty.openpty()
    out = tmp_path / "answers.json"
    code = (
        "import json, os, sys\n"
        "os.close(os.open(sys.argv[1], os.O_RDWR))  # the pty becomes our controlling tty\n"
        "from resplot.ssh.prompts import Prompt, Question, terminal_asker\n"
        "p = Prompt('keyboard-interactive', 'me@gpu', (Question('Password: '), "
        "Question('Token: ', True)), name='Duo two-factor')\n"
        "a = terminal_asker(p)\n"
        "open(sys.argv[2], 'w').write(json.dumps(a.values))\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code, os.ttyname(slave), str(out)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    os.close(slave)
    seen = b""

    def read_until(marker: bytes) -> None:
        nonlocal seen
        while marker not in seen:
            ready, _, _ = select.select([master], [], [], 60)
            assert ready, f"no {marker!r} from the child; it wrote {seen!r}"
            seen += os.read(master, 1024)

    try:
        read_until(b"Password: ")
        os.write(master, b"s3cret\n")
        read_until(b"Token: ")
        os.write(master, b"123456\n")
        assert child.wait(60) == 0
        with contextlib.suppress(OSError):
            while select.select([master], [], [], 0.5)[0]:
                seen += os.read(master, 1024)
    finally:
        child.kill()
        os.close(master)
    assert json.loads(out.read_text()) == ["s3cret", "123456"]
    assert b"Duo two-factor" in seen
    assert b"s3cret" not in seen and b"123456" in seen  # echo only where the server asked
