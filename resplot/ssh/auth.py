"""Logging in on one SSH transport, the way `ssh` does it.

Methods in OpenSSH's order (PreferredAuthentications, default publickey, keyboard-interactive,
password), each only where the server allows it and the config does not turn it off
(PasswordAuthentication, KbdInteractiveAuthentication; BatchMode yes asks nothing). A partial
success (a key accepted, then "now your one-time code") goes on with the methods the server
names next, which is how key + 2FA logins work.

Keys, in ssh's order: ssh-agent keys (with IdentitiesOnly only those matching an IdentityFile or
CertificateFile), then the key files. Certificates: each CertificateFile, and `<key>-cert.pub`
next to a key file, is offered (before the plain key) with the key it certifies, whether that
key is a file or held by the agent; a certificate the agent holds is offered as it is.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import paramiko

from resplot.ssh.config import HostConfig
from resplot.ssh.errors import AuthFailed, SSHError
from resplot.ssh.prompts import Prompt, Question, Secrets

log = logging.getLogger(__name__)

DEFAULT_METHODS = ("publickey", "keyboard-interactive", "password")


class LoginDropped(SSHError):
    """The connection ended during login (not a refusal)."""


@dataclass
class _Attempt:
    tried: list[str] = field(default_factory=list)  # what was offered, for the message
    keys: int = 0  # how many keys were offered
    encrypted: list[str] = field(default_factory=list)  # key files we could not unlock
    declined: str | None = None  # why an interactive method was not used


def authenticate(transport: paramiko.Transport, hop: HostConfig, secrets: Secrets) -> None:
    """Log in or raise AuthFailed (refused) / LoginDropped (the connection broke)."""
    attempt = _Attempt()
    allowed = _allowed(transport, hop)
    if allowed is None:
        return  # "none" was enough
    done: set[str] = set()
    while True:
        method = next((m for m in _methods(hop) if m in allowed and m not in done), None)
        if method is None:
            raise AuthFailed(_refusal(hop, allowed, attempt))
        done.add(method)
        try:
            if method == "publickey":
                remaining = _publickey(transport, hop, secrets, attempt)
            elif method == "keyboard-interactive":
                remaining = _interactive(transport, hop, secrets, attempt)
            else:
                remaining = _password(transport, hop, secrets, attempt)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            if isinstance(exc, paramiko.AuthenticationException):
                raise  # our own AuthFailed paths never get here; a bug would
            if attempt.keys > 1 and method == "publickey":
                raise AuthFailed(
                    f"{hop.label} closed the connection after {attempt.keys} refused keys "
                    f"({', '.join(attempt.tried)}); set IdentityFile and IdentitiesOnly yes for "
                    f"'{hop.alias}' so the right key goes first"
                ) from exc
            raise LoginDropped(f"{hop.label}: connection dropped during login: {exc}") from exc
        if transport.is_authenticated():
            return
        if remaining is not None:  # partial success: the server says what comes next
            allowed, done = list(remaining), set()


def _allowed(transport: paramiko.Transport, hop: HostConfig) -> list[str] | None:
    try:
        transport.auth_none(hop.user)
    except paramiko.BadAuthenticationType as exc:
        return list(exc.allowed_types)
    except paramiko.AuthenticationException:
        return list(DEFAULT_METHODS)
    except (paramiko.SSHException, OSError, EOFError) as exc:
        raise LoginDropped(f"{hop.label}: connection dropped during login: {exc}") from exc
    return None if transport.is_authenticated() else list(DEFAULT_METHODS)


def _methods(hop: HostConfig) -> list[str]:
    order = [m for m in (hop.preferred_authentications or DEFAULT_METHODS) if m in DEFAULT_METHODS]
    if not hop.kbd_interactive_authentication:
        order = [m for m in order if m != "keyboard-interactive"]
    if not hop.password_authentication:
        order = [m for m in order if m != "password"]
    return order


# -- public keys ------------------------------------------------------------------------------
def _publickey(transport, hop: HostConfig, secrets: Secrets, attempt: _Attempt):
    for label, key in offered_keys(hop, secrets, attempt):
        attempt.tried.append(label)
        attempt.keys += 1
        try:
            remaining = transport.auth_publickey(hop.user, key)
        except paramiko.BadAuthenticationType:
            return None
        except paramiko.AuthenticationException:
            continue
        if transport.is_authenticated() or remaining:
            return remaining
    return None


def offered_keys(
    hop: HostConfig, secrets: Secrets, attempt: _Attempt | None = None
) -> Iterator[tuple[str, paramiko.PKey]]:
    """(label, key) to offer, in ssh's order: agent keys, then key files; certificates first."""
    attempt = attempt or _Attempt()
    files = hop.key_file_candidates()
    certs = _certificates(hop, files)
    file_keys: list[tuple[str, paramiko.PKey]] = []
    for path in files:
        if path.exists():
            key = _load_key(path, hop, secrets, attempt)
            if key is not None:
                file_keys.append((str(path), key))
    wanted = {k.asbytes() for _, k in file_keys}
    wanted |= {b for b in (_public_blob(p) for p in files) if b}
    wanted |= {cert_key for cert_key, _ in certs.values()}
    wanted |= set(certs)
    seen: set[bytes] = set()
    agent = _agent(hop)
    try:
        agent_keys = list(agent.get_keys()) if agent is not None else []
        held = {k.asbytes() for k in agent_keys}  # certificates the agent holds are offered as is
        for key in agent_keys:
            blob = key.asbytes()
            if hop.identities_only and blob not in wanted:
                continue
            seen.add(blob)
            name = f"ssh-agent {key.get_name()} {key.comment or ''}".strip()
            for cert_blob, (cert_key, cert_path) in certs.items():
                if cert_key == blob and cert_blob not in held:
                    yield f"{name} + certificate {cert_path}", _with_cert(key, cert_blob)
            yield name, key
        for label, key in file_keys:
            if key.asbytes() in seen:
                continue
            for cert_blob, (cert_key, cert_path) in certs.items():
                if cert_key == key.asbytes():
                    yield f"{label} + certificate {cert_path}", _with_cert(key, cert_blob)
            yield label, key
    finally:
        if agent is not None:
            agent.close()


def _agent(hop: HostConfig) -> paramiko.Agent | None:
    """The agent: IdentityAgent's socket when set (`none`: no agent; `SSH_AUTH_SOCK` or
    `$VAR`: that variable), else $SSH_AUTH_SOCK (or Pageant / the OpenSSH pipe on Windows)."""
    import os
    import socket

    where = hop.identity_agent
    if where is not None and where.lower() == "none":
        return None
    if where is not None and where != "SSH_AUTH_SOCK":
        path = os.environ.get(where[1:], "") if where.startswith("$") else where
        agent = paramiko.Agent.__new__(paramiko.Agent)  # the socket given, not the environment's
        paramiko.agent.AgentSSH.__init__(agent)
        try:
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.connect(path)
            agent._connect(conn)
        except (OSError, AttributeError, paramiko.SSHException) as exc:
            log.warning("ssh-agent at %s (IdentityAgent) unusable: %s", path, exc)
            return None
        return agent
    try:
        return paramiko.Agent()
    except paramiko.SSHException as exc:
        log.warning("ssh-agent unusable: %s", exc)
        return None


def _certificates(hop: HostConfig, files: list[Path]) -> dict[bytes, tuple[bytes, str]]:
    """cert blob → (blob of the key it certifies, file), from CertificateFile and
    `<key>-cert.pub` beside each key file."""
    paths = [Path(p).expanduser() for p in hop.certificate_files]
    paths += [Path(f"{f}-cert.pub") for f in files]
    found: dict[bytes, tuple[bytes, str]] = {}
    for path in paths:
        try:
            fields = path.read_text().split()
            blob = base64.b64decode(fields[1])
            cert = paramiko.PublicBlob.from_string(" ".join(fields[:2]))
        except (OSError, IndexError, ValueError):
            continue
        inner = _certified_key_blob(cert)
        if inner is not None:
            found[blob] = (inner, str(path))
    return found


def _certified_key_blob(cert: paramiko.PublicBlob) -> bytes | None:
    """The plain public key inside an OpenSSH certificate (`ssh-ed25519-cert-v01@...`)."""
    msg = paramiko.Message(cert.key_blob)
    try:
        name = msg.get_text()
        plain = name.replace("-cert-v01@openssh.com", "")
        msg.get_string()  # nonce
        out = paramiko.Message()
        out.add_string(plain)
        if plain == "ssh-ed25519":
            out.add_string(msg.get_string())
        elif plain == "ssh-rsa":
            e, n = msg.get_mpint(), msg.get_mpint()
            out.add_mpint(e)
            out.add_mpint(n)
        elif plain.startswith("ecdsa-sha2-"):
            out.add_string(msg.get_string())  # curve
            out.add_string(msg.get_string())  # point
        else:
            return None
        return out.asbytes()
    except Exception:  # a file that only looks like a certificate
        return None


def _with_cert(key: paramiko.PKey, cert_blob: bytes) -> paramiko.PKey:
    import copy

    if isinstance(key, paramiko.AgentKey):  # the agent signs; the certificate rides along
        certified: paramiko.PKey = paramiko.AgentKey(key.agent, key.blob, key.comment)
    else:
        certified = copy.copy(key)
    certified.load_certificate(paramiko.Message(cert_blob))
    return certified


def _load_key(path: Path, hop: HostConfig, secrets: Secrets, attempt: _Attempt):
    unlocked = secrets.unlocked_key(str(path))
    if unlocked is not None:
        return unlocked
    try:
        return paramiko.PKey.from_path(path)
    except (TypeError, paramiko.PasswordRequiredException):
        pass  # encrypted: ask for its passphrase below
    except (ValueError, OSError, paramiko.SSHException) as exc:
        log.info("cannot load key %s: %s", path, exc)
        return None
    if hop.batch_mode:
        attempt.encrypted.append(str(path))
        return None
    for _ in range(max(1, hop.number_of_password_prompts)):
        prompt = Prompt(
            "passphrase",
            hop.label,
            (Question(f"Enter passphrase for key '{path}': "),),
            key_path=str(path),
        )
        answers = secrets.answer(prompt, [None])
        if not answers or not answers[0]:
            break
        try:
            key = paramiko.PKey.from_path(path, answers[0].encode())
        except (ValueError, TypeError, paramiko.SSHException) as exc:
            log.info("cannot unlock %s: %s", path, exc)
            continue
        secrets.keep_key(str(path), key)
        return key
    attempt.encrypted.append(str(path))
    return None


def _public_blob(path: Path) -> bytes | None:
    """The key blob from `path.pub`, so IdentitiesOnly can match agent keys without the file."""
    pub = Path(str(path) + ".pub")
    try:
        return base64.b64decode(pub.read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None


# -- passwords and keyboard-interactive -------------------------------------------------------
def _ident(kind: str, hop: HostConfig, text: str = "") -> tuple[str, ...]:
    return (kind, hop.user, hop.hostname, str(hop.port), text)


def _password(transport, hop: HostConfig, secrets: Secrets, attempt: _Attempt):
    if hop.batch_mode:
        attempt.declined = "BatchMode yes"
        return None
    ident = _ident("password", hop)
    question = Question(f"{hop.user}@{hop.hostname}'s password: ")
    for _ in range(max(1, hop.number_of_password_prompts)):
        # From this session's memory or the keyring, else asked.
        answers = secrets.answer(Prompt("password", hop.label, (question,)), [ident])
        if answers is None:
            if secrets.asker is not None:
                raise AuthFailed(f"login to {hop.label} cancelled")
            attempt.declined = "nobody to ask"
            return None
        attempt.tried.append("password")
        try:
            return transport.auth_password(hop.user, answers[0], fallback=False)
        except paramiko.BadAuthenticationType:
            return None
        except paramiko.AuthenticationException:
            secrets.forget(ident)
    return None


def _interactive(transport, hop: HostConfig, secrets: Secrets, attempt: _Attempt):
    if hop.batch_mode:
        attempt.declined = "BatchMode yes"
        return None
    unanswered = False
    last_ids: list[tuple[str, ...]] = []

    def handler(name: str, instructions: str, questions: list[tuple[str, bool]]) -> list[str]:
        nonlocal unanswered
        if not questions:
            return []  # an information-only round
        prompt = Prompt(
            "keyboard-interactive",
            hop.label,
            tuple(Question(t, bool(e)) for t, e in questions),
            name=name,
            instructions=instructions,
        )
        # A password prompt is kept for the session; a one-time code is asked every time.
        ids = [_ident("kbd", hop, t) if _is_password(t, e) else None for t, e in questions]
        answers = secrets.answer(prompt, ids)
        if answers is None:  # empty answers end this round as a refusal (no traceback)
            unanswered = True
            return [""] * len(questions)
        last_ids[:] = [i for i in ids if i is not None]
        return answers

    for _ in range(max(1, hop.number_of_password_prompts)):
        attempt.tried.append("keyboard-interactive")
        try:
            return transport.auth_interactive(hop.user, handler)
        except paramiko.BadAuthenticationType:
            return None
        except paramiko.AuthenticationException:
            if unanswered:
                attempt.tried.pop()
                if secrets.asker is not None:
                    raise AuthFailed(f"login to {hop.label} cancelled") from None
                attempt.declined = "nobody to ask"
                return None
            for ident in last_ids:
                secrets.forget(ident)
    return None


def _is_password(text: str, echo: bool) -> bool:
    return not echo and "password" in text.lower()


def _refusal(hop: HostConfig, allowed: list[str], attempt: _Attempt) -> str:
    """Why no method worked, and what the person can do about it."""
    interactive = [m for m in allowed if m in ("password", "keyboard-interactive")]
    usable = _methods(hop)
    hints = []
    if attempt.encrypted:
        keys = " ".join(attempt.encrypted)
        hints.append(
            f"the key {keys} is encrypted and was not unlocked: load it into ssh-agent with "
            f"`ssh-add {keys}`, or run resplot where it can ask for the passphrase"
        )
    if interactive and attempt.declined == "nobody to ask":
        hints.append(
            f"{hop.label} asks for {' or '.join(interactive)}, and there was nobody to ask: "
            "open it in the window, run the command in a terminal, or set SSH_ASKPASS"
        )
    elif interactive and attempt.declined == "BatchMode yes":
        hints.append(f"BatchMode yes for '{hop.alias}': no password or code is asked")
    if not [m for m in allowed if m in usable]:
        hints.append(
            f"{hop.label} allows {', '.join(allowed) or 'nothing'}, none of which is enabled for "
            f"'{hop.alias}' (PreferredAuthentications, PasswordAuthentication, "
            "KbdInteractiveAuthentication)"
        )
    tried = ", ".join(attempt.tried)
    if "publickey" in allowed and not attempt.keys:
        candidates = ", ".join(str(p) for p in hop.key_file_candidates()[:3])
        hints.append(
            f"no SSH key to log in to {hop.label}: no ssh-agent key"
            f"{' allowed (IdentitiesOnly)' if hop.identities_only else ''} and none of "
            f"{candidates}{', ...' if len(hop.key_file_candidates()) > 3 else ''} could be loaded"
        )
    elif "publickey" in allowed:
        hints.append(
            f"{hop.label} refused every key offered ({tried}). Add your public key to "
            f"~{hop.user}/.ssh/authorized_keys there, or set IdentityFile for '{hop.alias}' in "
            f"{hop.config_path or '~/.ssh/config'}"
        )
    elif "password" in attempt.tried or "keyboard-interactive" in attempt.tried:
        hints.append(f"{hop.label}: permission denied ({tried})")
    return "; ".join(hints) or f"{hop.label}: permission denied ({', '.join(allowed)})"
