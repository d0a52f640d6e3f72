"""resplot runs on laptops: the platform-dependent choices (system ssh files, the shell that
runs a ProxyCommand, where mirrors live, how a terminal is found) for Windows, macOS and Linux,
each checked with that platform's own path rules; the Linux ones also run for real elsewhere
in the suite (ProxyCommand, Match exec, sync)."""

from __future__ import annotations

import ntpath
import sys

import pytest

from resplot.ssh.openssh_config import shell_argv, system_ssh_dir
from resplot.ssh.prompts import _has_tty
from resplot.ui.local_copies import data_dir


@pytest.mark.parametrize(
    ("platform", "env", "expected"),
    [
        ("win32", {"PROGRAMDATA": r"D:\ProgramData"}, r"D:\ProgramData\ssh"),
        ("win32", {}, r"C:\ProgramData\ssh"),
        ("darwin", {}, "/etc/ssh"),
        ("linux", {}, "/etc/ssh"),
    ],
)
def test_the_system_ssh_directory(platform, env, expected):
    assert system_ssh_dir(platform, env) == expected


@pytest.mark.parametrize(
    ("platform", "env", "expected"),
    [
        (
            "win32",
            {"ComSpec": r"C:\Windows\system32\cmd.exe"},
            [r"C:\Windows\system32\cmd.exe", "/c", "nc %h"],
        ),
        ("win32", {}, ["cmd.exe", "/c", "nc %h"]),
        ("linux", {"SHELL": "/bin/zsh"}, ["/bin/zsh", "-c", "exec nc %h"]),
        ("darwin", {}, ["/bin/sh", "-c", "exec nc %h"]),
    ],
)
def test_commands_run_through_the_platform_shell(platform, env, expected):
    assert shell_argv("nc %h", platform, env) == expected


def test_mirrors_live_in_local_app_data_on_windows():
    got = data_dir("win32", {"LOCALAPPDATA": r"C:\Users\me\AppData\Local"})
    assert str(got) == ntpath.join(r"C:\Users\me\AppData\Local", "resplot")


def test_a_windows_console_is_found_on_stdin(monkeypatch):
    class Console:
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdin", Console())
    assert _has_tty("win32") is True
    monkeypatch.setattr(sys, "stdin", None)
    assert _has_tty("win32") is False
