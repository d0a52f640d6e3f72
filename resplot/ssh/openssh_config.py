"""OpenSSH's client configuration, evaluated the way `ssh -G` evaluates it (readconf.c, 9.x).

paramiko's SSHConfig differs from OpenSSH in ways users hit (a second `Match` pass applied
unconditionally, `Include` scope leaking past the included file, a trailing `# comment` kept in
a value, no system-wide file), so resplot reads the files itself, by OpenSSH's rules:

- a line is `Keyword [=] args`; args split like argv_split() (quotes, `\\` escapes) and end at a
  word starting with `#`; ProxyCommand keeps the rest of its line raw, as ssh runs it.
- files: the user file (`~/.ssh/config`, or the one given, like `ssh -F`, which then skips the
  rest), then `/etc/ssh/ssh_config`. For each option the first value obtained wins;
  IdentityFile and CertificateFile accumulate (duplicates dropped).
- `Host` patterns match the host as typed (case-sensitive); `Match` criteria (`all`, `host`,
  `originalhost`, `user`, `localuser`, `exec`, `canonical`, `final`, each with `!`) see the
  values obtained so far. A second ("final") pass runs only when a `Match final` was seen; it
  keeps every value of the first pass, and `Host` then matches the resolved HostName.
- `Include` (globs; relative to ~/.ssh, or /etc/ssh for the system file) reads the file in
  place; a file included from an inactive block applies nothing; after it, the block that
  included it is active again, as before the Include.
- ProxyCommand and ProxyJump exclude each other: the first one obtained wins, and
  `ProxyCommand none` also turns off a later ProxyJump.

Unknown keywords are ignored (logged once): a newer OpenSSH knows keywords this table lacks, and
refusing them would refuse a config that the user's ssh accepts. Hostname canonicalisation
(CanonicalizeHostname, a DNS lookup) is not done; `Match canonical` matches in the final pass.
"""

from __future__ import annotations

import glob
import logging
import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from resplot.ssh.openssh_tokens import (  # noqa: F401 - ConfigError, expand_tokens: this API
    ConfigError,
    expand_hostname,
    expand_tokens,
    local_user,
    percent_expand,
    shell_argv,
    system_ssh_dir,
)

log = logging.getLogger(__name__)


SYSTEM_CONFIG = os.path.join(system_ssh_dir(), "ssh_config")
USER_CONFIG = "~/.ssh/config"
MAX_INCLUDE_DEPTH = 16  # READCONF_MAX_DEPTH
DEFAULT_IDENTITY_FILES = (
    "~/.ssh/id_rsa",
    "~/.ssh/id_ecdsa",
    "~/.ssh/id_ecdsa_sk",
    "~/.ssh/id_ed25519",
    "~/.ssh/id_ed25519_sk",
    "~/.ssh/id_xmss",
    "~/.ssh/id_dsa",
)
DEFAULT_USER_KNOWN_HOSTS = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")
DEFAULT_GLOBAL_KNOWN_HOSTS = tuple(
    os.path.join(system_ssh_dir(), name) for name in ("ssh_known_hosts", "ssh_known_hosts2")
)

# How each keyword's arguments are read (all others: one argument, first value wins).
_ACCUMULATE = {"identityfile", "certificatefile"}
_LISTS = {"userknownhostsfile", "globalknownhostsfile", "sendenv", "setenv", "canonicaldomains"}
_BOOLEANS = {
    "identitiesonly",
    "hashknownhosts",
    "batchmode",
    "passwordauthentication",
    "kbdinteractiveauthentication",
    "pubkeyauthentication",
    "forwardagent",
    "compression",
}
_INTEGERS = {"serveralivecountmax", "numberofpasswordprompts", "connectionattempts"}
_TIMES = {"connecttimeout", "serveraliveinterval"}
_SINGLE = (
    {
        "hostname",
        "user",
        "port",
        "hostkeyalias",
        "stricthostkeychecking",
        "identityagent",
        "preferredauthentications",
        "canonicalizehostname",
        "addkeystoagent",
        "controlmaster",
        "controlpath",
        "controlpersist",
        "loglevel",
        "requesttty",
        "remotecommand",
    }
    | _BOOLEANS
    | _INTEGERS
    | _TIMES
)
# Keywords OpenSSH accepts that resolve nothing resplot uses; read and dropped silently.
# Laid out by hand: 75 keywords as a paragraph (the formatter would put one a line).
_KNOWN_OTHERS = {
    "addressfamily", "bindaddress", "bindinterface", "canonicalizefallbacklocal",
    "canonicalizemaxdots", "canonicalizepermittedcnames", "casignaturealgorithms", "checkhostip",
    "ciphers", "clearallforwardings", "dynamicforward", "enableescapecommandline",
    "enablesshkeysign", "escapechar", "exitonforwardfailure", "fingerprinthash",
    "forkafterauthentication", "forwardx11", "forwardx11timeout", "forwardx11trusted",
    "gatewayports", "gssapiauthentication", "gssapidelegatecredentials",
    "hostbasedacceptedalgorithms", "hostbasedauthentication", "hostkeyalgorithms", "ipqos",
    "kexalgorithms", "knownhostscommand", "localcommand", "localforward", "logverbose", "macs",
    "nohostauthenticationforlocalhost", "permitlocalcommand", "permitremoteopen", "pkcs11provider",
    "proxyusefdpass", "pubkeyacceptedalgorithms", "pubkeyacceptedkeytypes", "rekeylimit",
    "remoteforward", "revokedhostkeys", "securitykeyprovider", "sessiontype", "stdinnull",
    "streamlocalbindmask", "streamlocalbindunlink", "syslogfacility", "tcpkeepalive", "tunnel",
    "tunneldevice", "updatehostkeys", "verifyhostkeydns", "visualhostkey", "xauthlocation",
    "channeltimeout", "obscurekeystroketiming", "tag", "requiredrsasize",
    "challengeresponseauthentication", "gssapikeyexchange", "gssapiclientidentity",
    "gssapiserveridentity", "gssapirenewalforcesrekey", "gssapitrustdns", "gssapikexalgorithms",
    "useroaming", "protocol", "cipher", "rsaauthentication", "rhostsrsaauthentication",
    "compressionlevel", "usekeychain", "ignoreunknown",
}  # fmt: skip


@dataclass
class Options:
    """The values obtained for one host, as `ssh -G` has them before it prints them."""

    host_arg: str
    values: dict[str, object] = field(default_factory=dict)
    identity_files: list[str] = field(default_factory=list)
    certificate_files: list[str] = field(default_factory=list)
    files_read: list[str] = field(default_factory=list)

    def get(self, name: str, default=None):
        return self.values.get(name, default)

    def set_first(self, name: str, value: object) -> None:
        self.values.setdefault(name, value)


def split_args(text: str) -> list[str]:
    """OpenSSH's argv_split(s, terminate_on_comment=1): quotes group, `\\` escapes a quote, a
    backslash or (outside quotes) a space; a word that starts with `#` ends the line."""
    args: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] in " \t":
            i += 1
            continue
        if text[i] == "#":
            break
        quote, arg = "", []
        while i < n:
            c = text[i]
            if (
                c == "\\"
                and i + 1 < n
                and (text[i + 1] in "'\"\\" or (not quote and text[i + 1] == " "))
            ):
                i += 1
                arg.append(text[i])
            elif not quote and c in " \t":
                break
            elif not quote and c in "\"'":
                quote = c
            elif quote and c == quote:
                quote = ""
            else:
                arg.append(c)
            i += 1
        if quote:
            raise ConfigError("invalid quotes")
        args.append("".join(arg))
    return args


_LINE = re.compile(r"\s*([^\s\"=]*)\s*=?\s*(.*)$")


def convtime(text: str) -> int:
    """OpenSSH time format: `90`, `1m30s`, `2h` → seconds."""
    if re.fullmatch(r"\d+", text):
        return int(text)
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    parts = re.findall(r"(\d+)([smhdwSMHDW]?)", text)
    if not parts or "".join(a + b for a, b in parts) != text:
        raise ConfigError(f"invalid time value '{text}'")
    return sum(int(a) * units[(b or "s").lower()] for a, b in parts)


def _parse_bool(text: str, key: str) -> bool:
    value = text.lower()
    if value in ("yes", "true"):
        return True
    if value in ("no", "false"):
        return False
    raise ConfigError(f'unsupported option "{text}" for {key} (want yes or no)')


def _strict(text: str) -> str:
    value = text.lower()
    mapping = {"yes": "true", "true": "true", "no": "false", "false": "false", "off": "false"}
    if value in mapping:
        return mapping[value]
    if value in ("ask", "accept-new"):
        return value
    raise ConfigError(f'unsupported StrictHostKeyChecking "{text}"')


def _port(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ConfigError(f"Bad port '{text}'.")
    return int(text)


@dataclass
class _Reader:
    """One evaluation pass over the config files."""

    options: Options
    host: str  # what `Host` patterns match: the host as typed, or in the final pass HostName
    final: bool
    user_file: bool
    local_user: str
    run_exec: Callable[[str], bool]
    want_final: bool = False

    def read(self, path: Path, depth: int = 0, *, never_match: bool = False) -> bool:
        if depth > MAX_INCLUDE_DEPTH:
            raise ConfigError(f"{path}: Include nested too deeply")
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return False
        except IsADirectoryError:
            return False
        except OSError as exc:
            raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from exc
        self.options.files_read.append(str(path))
        active = not never_match
        for lineno, line in enumerate(text.splitlines(), start=1):
            try:
                active = self._line(line, active, depth, never_match)
            except ConfigError as exc:
                raise ConfigError(f"{path} line {lineno}: {exc}") from None
        return True

    def _line(self, line: str, active: bool, depth: int, never_match: bool) -> bool:
        line = line.rstrip(" \t\r\n\f")
        m = _LINE.match(line)
        keyword, rest = (m.group(1), m.group(2)) if m else ("", "")
        if not keyword or keyword.startswith("#"):
            return active
        key = keyword.lower()
        if not rest:
            raise ConfigError(f'no argument after keyword "{key}"')
        if key == "proxycommand":
            self._proxy_command(rest, active)
            return active
        if key == "proxyjump":
            self._proxy_jump(rest, active)
            return active
        args = split_args(rest)
        if key == "host":
            return self._host(args, never_match)
        if key == "match":
            return self._match(args, never_match)
        if key == "include":
            for arg in args:
                self._include(arg, depth, active)
            return active  # the including block's state, whatever the file did
        if not args:
            raise ConfigError(f"missing argument for {key}")
        self._option(key, args, active)
        return active

    def _option(self, key: str, args: list[str], active: bool) -> None:
        opts = self.options
        if key in _ACCUMULATE:
            if active:
                target = opts.identity_files if key == "identityfile" else opts.certificate_files
                if args[0] not in target:
                    target.append(args[0])
            return
        if key in _LISTS:
            if active:
                opts.set_first(key, tuple(args))
            return
        if key not in _SINGLE:
            if key not in _KNOWN_OTHERS and not _ignored(key, opts.get("ignoreunknown", ())):
                _warn_unknown(key)
            if key == "ignoreunknown" and active:
                opts.set_first(key, tuple(args))
            return
        if len(args) > 1:
            raise ConfigError(f"keyword {key} extra arguments at end of line")
        arg = args[0]
        value: object = arg
        # Values are checked even in inactive blocks, as ssh does.
        if key == "port":
            value = _port(arg)
        elif key in _BOOLEANS:
            value = _parse_bool(arg, key)
        elif key in _INTEGERS:
            if not arg.lstrip("-").isdigit():
                raise ConfigError(f"bad number '{arg}' for {key}")
            value = int(arg)
        elif key in _TIMES:
            value = None if arg.lower() == "none" and key == "connecttimeout" else convtime(arg)
        elif key == "stricthostkeychecking":
            value = _strict(arg)
        if active:
            opts.set_first(key, value)

    def _proxy_command(self, rest: str, active: bool) -> None:
        # The rest of the line as written (comments too: the shell reads them), like ssh.
        command = rest.lstrip(" \t=")
        if active and "proxyjump" not in self.options.values:
            self.options.set_first("proxycommand", command)

    def _proxy_jump(self, rest: str, active: bool) -> None:
        value = rest.lstrip(" \t=").split("#", 1)[0].rstrip()
        if not value:
            raise ConfigError("missing argument for proxyjump")
        if value.lower() == "none":
            # ssh: `ProxyJump none` stops later ProxyJumps but not a later ProxyCommand.
            if active:
                self.options.values.setdefault("proxyjump_none", True)
            return
        blocked = {"proxycommand", "proxyjump", "proxyjump_none"} & set(self.options.values)
        if active and not blocked:
            self.options.set_first("proxyjump", value)

    def _host(self, patterns: list[str], never_match: bool) -> bool:
        if not patterns:
            raise ConfigError('no argument after keyword "host"')
        if never_match:
            return False
        active = False
        for pattern in patterns:
            negated = pattern.startswith("!")
            if match_pattern(self.host, pattern[1:] if negated else pattern):
                if negated:
                    return False
                active = True
        return active

    def _match(self, words: list[str], never_match: bool) -> bool:
        if not words:
            raise ConfigError("missing Match criteria")
        opts = self.options
        hostname = opts.get("hostname")
        if self.final:
            host = str(hostname)
        elif hostname is not None:
            host = expand_hostname(str(hostname), opts.host_arg)
        else:
            host = opts.host_arg
        user = str(opts.get("user") or self.local_user)
        result = True
        i = 0
        while i < len(words):
            word = words[i]
            i += 1
            negate = word.startswith("!")
            attrib = (word[1:] if negate else word).lower()
            if attrib == "all":
                if len(words) > 1:
                    raise ConfigError("'all' cannot be combined with other Match attributes")
                ok = True
            elif attrib == "canonical":
                ok = self.final
            elif attrib == "final":
                self.want_final = True
                ok = self.final
            elif attrib in ("host", "originalhost", "user", "localuser", "exec"):
                if i >= len(words) or not words[i] or words[i].startswith("#"):
                    raise ConfigError(f"Missing Match criteria for {attrib}")
                arg = words[i]
                i += 1
                if attrib == "host":
                    ok = match_pattern_list(host, arg, lower=True) == 1
                elif attrib == "originalhost":
                    ok = match_pattern_list(opts.host_arg, arg, lower=True) == 1
                elif attrib == "user":
                    ok = match_pattern_list(user, arg) == 1
                elif attrib == "localuser":
                    ok = match_pattern_list(self.local_user, arg) == 1
                else:
                    if not result or never_match:  # ssh skips exec once the line has failed
                        continue
                    ok = self.run_exec(self._expand_exec(arg, host, user))
            else:
                raise ConfigError(f"Unsupported Match attribute {attrib}")
            if ok == negate:
                result = False
        return result and not never_match

    def _expand_exec(self, command: str, host: str, user: str) -> str:
        port = str(self.options.get("port") or 22)
        return expand_tokens(
            command,
            host=host,
            host_arg=self.options.host_arg,
            port=port,
            remote_user=user,
            host_key_alias=str(self.options.get("hostkeyalias") or host),
        )

    def _include(self, pattern: str, depth: int, active: bool) -> None:
        if not (pattern.startswith("~") or os.path.isabs(pattern)):
            pattern = os.path.join("~/.ssh" if self.user_file else system_ssh_dir(), pattern)
        pattern = os.path.expanduser(pattern)
        for path in sorted(glob.glob(pattern)):
            self.read(Path(path), depth + 1, never_match=not active)


_warned: set[str] = set()


def _warn_unknown(key: str) -> None:
    if key not in _warned:
        _warned.add(key)
        log.warning("ssh config: keyword %r is not known to resplot and is ignored", key)


def _ignored(key: str, patterns: object) -> bool:
    return isinstance(patterns, tuple) and any(match_pattern_list(key, p) == 1 for p in patterns)


def match_pattern(text: str, pattern: str) -> bool:
    """OpenSSH match_pattern: `*` and `?` wildcards, case-sensitive, whole string."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, text, re.DOTALL) is not None


def match_pattern_list(text: str, patterns: str, *, lower: bool = False) -> int:
    """1 if a pattern of the comma list matches, -1 if a `!pattern` matches, else 0."""
    got = 0
    for pattern in patterns.split(","):
        pattern = pattern.lower() if lower else pattern
        negated = pattern.startswith("!")
        if match_pattern(text, pattern[1:] if negated else pattern):
            if negated:
                return -1
            got = 1
    return got


def read_options(
    host_arg: str,
    *,
    config: str | Path | None = None,
    system_config: str | Path | None = SYSTEM_CONFIG,
    forced: dict[str, object] | None = None,
    run_exec: Callable[[str], bool] | None = None,
) -> Options:
    """Every value obtained for `host_arg`, by ssh's rules; `config` is like `ssh -F` (the
    system file is then not read); `forced` holds command-line values (-l, -p, -J)."""
    options = Options(host_arg)
    for key, value in (forced or {}).items():
        if value is not None:
            options.values[key] = value
    if config is not None:
        files = [(Path(config).expanduser(), True)]
    else:
        files = [(Path(USER_CONFIG).expanduser(), True)]
        if system_config is not None:
            files.append((Path(system_config), False))
    me = local_user()
    execute = run_exec or _run_exec

    def one_pass(host: str, final: bool) -> bool:
        want = False
        for path, user_file in files:
            reader = _Reader(options, host, final, user_file, me, execute)
            reader.read(path)
            want |= reader.want_final
        return want

    if one_pass(host_arg, final=False):
        # ssh fixes HostName first; then Host patterns see it, and no HostName line changes it.
        options.values["hostname"] = resolved_hostname(options)
        one_pass(str(options.values["hostname"]), final=True)
    return options


def resolved_hostname(options: Options) -> str:
    """HostName with %h expanded and lowercased, as ssh uses and prints it."""
    value = options.get("hostname")
    if value is None:
        return options.host_arg.lower()
    return expand_hostname(str(value), options.host_arg).lower()


def server_alive_interval(options: Options) -> int:
    """ServerAliveInterval, where BatchMode yes makes the unset default 300 s (as in ssh)."""
    value = options.get("serveraliveinterval")
    if value is None:
        return 300 if options.get("batchmode") else 0
    return int(value)  # type: ignore[call-overload]


def _run_exec(command: str) -> bool:
    try:
        done = subprocess.run(
            shell_argv(command),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("ssh config: Match exec %r failed: %s", command, exc)
        return False
    return done.returncode == 0


def ssh_g(options: Options) -> dict[str, str]:
    """The options resplot uses, spelled as `ssh -G` prints them (for comparing with it)."""
    v = options.values
    hostname = resolved_hostname(options)
    user = str(v.get("user") or local_user())
    port = str(v.get("port") or 22)

    def yes(name: str, default: bool) -> str:
        return "yes" if v.get(name, default) else "no"

    def files(name: str, default: tuple[str, ...]) -> str:
        values = v.get(name, default)
        assert isinstance(values, tuple)
        return " ".join(
            expand_tokens(
                f,
                host=hostname,
                host_arg=options.host_arg,
                port=port,
                remote_user=user,
                host_key_alias=v.get("hostkeyalias"),  # type: ignore[arg-type]
            )
            for f in values
        )

    out = {
        "hostname": hostname,
        "user": user,
        "port": port,
        "batchmode": yes("batchmode", False),
        "hashknownhosts": yes("hashknownhosts", False),
        "identitiesonly": yes("identitiesonly", False),
        "kbdinteractiveauthentication": yes("kbdinteractiveauthentication", True),
        "passwordauthentication": yes("passwordauthentication", True),
        "stricthostkeychecking": str(v.get("stricthostkeychecking", "ask")),
        "numberofpasswordprompts": str(v.get("numberofpasswordprompts", 3)),
        "serveralivecountmax": str(v.get("serveralivecountmax", 3)),
        "serveraliveinterval": str(server_alive_interval(options)),
        "identityfile": " ".join(options.identity_files or DEFAULT_IDENTITY_FILES),
        "certificatefile": " ".join(options.certificate_files),
        "globalknownhostsfile": files("globalknownhostsfile", DEFAULT_GLOBAL_KNOWN_HOSTS),
        "userknownhostsfile": files("userknownhostsfile", DEFAULT_USER_KNOWN_HOSTS),
        "connecttimeout": "none" if v.get("connecttimeout") is None else str(v["connecttimeout"]),
        "hostkeyalias": str(v.get("hostkeyalias") or ""),
        "preferredauthentications": str(v.get("preferredauthentications") or ""),
    }
    command = v.get("proxycommand")
    out["proxycommand"] = "" if command is None or command == "none" else str(command)
    out["proxyjump"] = str(v.get("proxyjump") or "")
    return out
