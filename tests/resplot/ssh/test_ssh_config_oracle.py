"""The ssh config resolver against OpenSSH itself: each case is resolved by resplot and by
`ssh -G -F FILE HOST` (the real client), and every option resplot uses must read the same, or
both must refuse the config. CI installs the client (openssh-server depends on it); a missing
`ssh` fails there, as the other system dependencies do.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from resplot.ssh.openssh_config import ConfigError, read_options, ssh_g
from tests.fixtures.postgres import missing_system_dependency

pytestmark = pytest.mark.integration

# (name, config text, host as typed, ssh's command-line options). `{dir}` is the case's folder.
CASES: list[tuple[str, str, str, tuple[str, ...]]] = [
    ("alias stanza", "Host gpu\n  HostName 10.0.0.7\n  Port 2222\n  User alice\n", "gpu", ()),
    (
        "first obtained wins",
        "Host gpu*\n User first\nHost gpu1\n User second\n HostName h1\n"
        "Host *\n User fallback\n Port 2200\n",
        "gpu1",
        (),
    ),
    ("negated pattern", "Host * !bastion\n User inner\nHost *\n User outer\n", "bastion", ()),
    ("several patterns", "Host a b c\n Port 2001\n", "b", ()),
    ("Host is case-sensitive", "Host Foo\n HostName x1\n", "foo", ()),
    ("typed case kept for Host", "Host FOO\n HostName X1\n", "FOO", ()),
    ("hostname lowercased", "Host a\n HostName MiXeD.Example\n", "a", ()),
    ("HostName %h", "Host a\n HostName %h.lab.example\n", "a", ()),
    ("HostName %%", "Host a\n HostName x%%y\n", "a", ()),
    ("HostName %p refused", "Host a\n HostName a%p\n", "a", ()),
    ("HostName %r refused", "Host a\n HostName %r.x\n", "a", ()),
    ("trailing comment", "Host a\n HostName 10.1.2.3 # the lab box\n Port 22 # ssh\n", "a", ()),
    ("comment on Host line", "Host a # mine\n User u2\n", "a", ()),
    ("hash inside a word", "Host a\n HostName h#x\n", "a", ()),
    ("equals sign", "Host a\n Port=2222\n User = u1\n", "a", ()),
    ("quoted value", 'Host a\n HostName "x y"\n IdentityFile "/k/with space"\n', "a", ()),
    ("keywords any case", "HOST a\n HOSTNAME h.example\n pOrT 2022\n", "a", ()),
    ("tabs and blank lines", "\n\n# top\nHost\ta\n\tHostName\th\n\n", "a", ()),
    (
        "identity files accumulate once",
        "Host a\n IdentityFile ~/k1\n IdentityFile ~/k1\n"
        "Host *\n IdentityFile ~/k1\n IdentityFile ~/k2\n",
        "a",
        (),
    ),
    ("identity tokens kept", "Host a\n IdentityFile ~/.ssh/%h_%r_%p\n", "a", ()),
    ("certificate files", "Host a\n CertificateFile ~/c_%r\n CertificateFile /c2\n", "a", ()),
    ("ProxyCommand raw", "Host a\n ProxyCommand ssh -W %h:%p bastion # via bastion\n", "a", ()),
    (
        "ProxyJump first wins over ProxyCommand",
        "Host a\n ProxyJump j1\nHost *\n ProxyCommand nc %h %p\n",
        "a",
        (),
    ),
    (
        "ProxyCommand first wins over wildcard ProxyJump",
        "Host a\n ProxyCommand nc %h %p\nHost *\n ProxyJump j\n",
        "a",
        (),
    ),
    (
        "ProxyCommand none blocks ProxyJump",
        "Host a\n ProxyCommand none\nHost *\n ProxyJump jj\n",
        "a",
        (),
    ),
    ("ProxyJump none blocks ProxyJump", "Host a\n ProxyJump none\nHost *\n ProxyJump x\n", "a", ()),
    (
        "ProxyJump none lets ProxyCommand in",
        "Host a\n ProxyJump none\nHost *\n ProxyCommand nc %h\n",
        "a",
        (),
    ),
    ("ProxyJump chain with comment", "Host a\n ProxyJump u@h1:2200,h2 # two hops\n", "a", ()),
    ("-J beats ProxyCommand", "Host a\n ProxyCommand nc %h %p\n", "a", ("-J", "jx")),
    (
        "Include scope restored",
        "Host a\n Include {dir}/inc1\n Port 2000\nHost *\n User star\n",
        "a",
        (),
    ),
    ("Include in inactive block", "Host b\n Include {dir}/inc2\nHost a\n Port 1\n", "a", ()),
    ("Include in active block", "Host b\n Include {dir}/inc2\nHost a\n Port 1\n", "b", ()),
    ("Include at top", "Include {dir}/inc1\nPort 2345\nHost a\n User ua\n", "a", ()),
    ("Include glob order", "Include {dir}/glob*.conf\n", "a", ()),
    ("Match host sees HostName", "Host a\n HostName aa\nMatch host aa\n Port 4\n", "a", ()),
    (
        "early Match host does not apply",
        "Match host real.example\n ProxyJump j\n Port 2022\nHost a\n HostName real.example\n",
        "a",
        (),
    ),
    ("Match originalhost", "Host a\n HostName x\nMatch originalhost a\n Port 7\n", "a", ()),
    ("Match user from -l", "Match user bob host a\n Port 11\n", "a", ("-l", "bob")),
    ("Match user set earlier", "Host a\n User bob\nMatch user bob\n Port 5\n", "a", ()),
    ("Match user set later", "Match user bob\n Port 5\nHost a\n User bob\n", "a", ()),
    (
        "Match final re-reads by HostName",
        "Match final\n Port 9\nHost a\n HostName aa\nHost aa\n User viahost\n",
        "a",
        (),
    ),
    (
        "final pass keeps first values",
        "Host a\n User first\n HostName h2\nMatch final host h2\n User second\n IdentityFile /f\n",
        "a",
        (),
    ),
    ("Match canonical without final", "Match canonical\n User canon\nHost a\n Port 3\n", "a", ()),
    (
        "Match canonical in final pass",
        "Match canonical\n User canon\nMatch final\n Port 3\n",
        "a",
        (),
    ),
    ("Match all", "Match all\n User all1\n", "a", ()),
    ("Match all combined refused", "Match all final\n Port 12\n", "a", ()),
    ("Match negated host", "Host a\n HostName aa\nMatch !host aa\n User notaa\n", "a", ()),
    ("Match host list with negation", 'Match host "a*,!ab"\n User m\n', "ab", ()),
    (
        "Match exec",
        'Match exec "test 1 = 1" host a\n Port 6\nMatch exec false\n User ex\n',
        "a",
        (),
    ),
    (
        "Match exec tokens",
        'Match exec "test %h = hh -a %n = a"\n Port 8\nHost a\n HostName hh\n',
        "a",
        (),
    ),
    ("Port extra argument refused", "Host a\n Port 22 33\n", "a", ()),
    ("bad port refused", "Host *\n Port 0\n", "a", ()),
    ("bad port refused in inactive block", "Host zz\n Port x\n", "a", ()),
    (
        "-p and -l beat the file",
        "Host a\n Port 2222\n User alice\n",
        "a",
        ("-p", "2022", "-l", "bob"),
    ),
    (
        "host key options",
        "Host a\n StrictHostKeyChecking yes\n HostKeyAlias hk\n HashKnownHosts yes\n"
        "UserKnownHostsFile ~/kh /x/%h\n GlobalKnownHostsFile /g1\n",
        "a",
        (),
    ),
    (
        "accept-new and no",
        "Host a\n StrictHostKeyChecking accept-new\nHost b\n StrictHostKeyChecking no\n",
        "a",
        (),
    ),
    (
        "times",
        "Host a\n ConnectTimeout 1m30s\n ServerAliveInterval 2m\n ServerAliveCountMax 5\n",
        "a",
        (),
    ),
    (
        "login options",
        "Host a\n BatchMode yes\n PasswordAuthentication no\n KbdInteractiveAuthentication no\n"
        " NumberOfPasswordPrompts 1\n PreferredAuthentications keyboard-interactive,password\n",
        "a",
        (),
    ),
    ("IdentitiesOnly", "Host a\n IdentitiesOnly yes\n IdentityFile /k\n", "a", ()),
    ("question-mark wildcard", "Host gpu?\n Port 2002\nHost gpu??\n Port 2003\n", "gpu12", ()),
    ("Match localuser", "Match localuser {me}\n User viamatch\n", "a", ()),
    ("Match negated user", "Match !user nobody-here\n Port 2004\n", "a", ()),
    ("Match user list", 'Match user "x,{me},y"\n Port 2005\n', "a", ()),
    ("nested Include", "Host a\n Include {dir}/outer\n Port 2006\n", "a", ()),
    (
        "IgnoreUnknown lets a keyword pass",
        "IgnoreUnknown UseKeychain\nHost a\n UseKeychain yes\n Port 2007\n",
        "a",
        (),
    ),
    ("uppercase host through %h", "Host *\n HostName %h.lab\n", "GPU", ()),
    ("wildcard stanza after Match", "Match host a\n User m1\nHost *\n User star\n", "a", ()),
]

INCLUDED = {
    "inc1": "Host zz\n User zz\n",
    "inc2": "Host *\n User included\n",
    "glob2.conf": "User second\nPort 2\n",
    "glob1.conf": "User first\n",
    "outer": "Include {dir}/inner\nUser outer\n",
    "inner": "User inner\nHost zz\n User zz\n",
}


def ssh_client() -> str:
    path = shutil.which("ssh")
    if path is None:
        missing_system_dependency("OpenSSH client (ssh; apt-get install openssh-client)")
    return str(path)


def run_ssh_g(ssh: str, config: Path, host: str, flags: tuple[str, ...]) -> dict[str, str] | None:
    done = subprocess.run(
        [ssh, "-G", "-F", str(config), *flags, host],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=30,
        check=False,
    )
    if done.returncode != 0:
        return None
    got: dict[str, list[str]] = {}
    for line in done.stdout.splitlines():
        key, _, value = line.partition(" ")
        got.setdefault(key.lower(), []).append(value)
    return {k: " ".join(v) for k, v in got.items()}


def resolve(config: Path, host: str, flags: tuple[str, ...]) -> dict[str, str] | None:
    opts = dict(zip(flags[::2], flags[1::2], strict=True))
    forced = {
        "user": opts.get("-l"),
        "port": int(opts["-p"]) if "-p" in opts else None,
        "proxyjump": opts.get("-J"),
    }
    try:
        return ssh_g(read_options(host, config=config, forced=forced))
    except ConfigError:
        return None


def test_the_table_has_forty_cases_or_more():
    assert len(CASES) >= 40 and len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize(
    ("text", "host", "flags"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_resolution_matches_ssh_dash_g(text, host, flags, tmp_path):
    ssh = ssh_client()
    import getpass

    for name, body in INCLUDED.items():
        (tmp_path / name).write_text(body.replace("{dir}", str(tmp_path)))
    config = tmp_path / "config"
    config.write_text(text.replace("{dir}", str(tmp_path)).replace("{me}", getpass.getuser()))
    theirs = run_ssh_g(ssh, config, host, flags)
    ours = resolve(config, host, flags)
    if theirs is None or ours is None:
        assert theirs is None and ours is None, f"ssh refused: {theirs is None}; ours: {ours}"
        return
    mismatched = {k: (v, theirs.get(k, "")) for k, v in ours.items() if theirs.get(k, "") != v}
    assert not mismatched, f"(resplot, ssh -G): {mismatched}"
