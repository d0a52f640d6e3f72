"""The two lanes of the suite: the fast lane (`-m "not integration"`) and the integration tests.

A test is ``integration`` when it needs a system service or starts processes: the sshd,
PostgreSQL, headless Chromium, second-user and tmpfs fixtures; a process of its own
(subprocess, multiprocessing, fork, torchrun); resplot's real window. The fixtures mark their
tests here, at collection (`mark_integration`, called by tests/conftest.py), so a new test using
one is marked without anyone remembering. A test that starts processes or opens the window
itself carries the mark in its file (``pytestmark`` or a decorator); `unmarked_starters`, run by
tests/test_lanes.py in the fast lane, finds one that does not and names it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent

# A test using one of these (directly or through another fixture) is an integration test.
INTEGRATION_FIXTURES = frozenset(
    {
        "sshd_env",  # tests/fixtures/sshd.py: a real OpenSSH sshd on loopback
        "ssh_config",
        "tcp_proxy",  # a proxy in front of that sshd
        "login_server",  # tests/fixtures/logins.py: sshd with password and 2FA users
        "postgres_url",  # tests/fixtures/postgres.py: a real PostgreSQL server
        "pg_store",
        "own_postgres",
        "browser",  # tests/fixtures/browser.py: headless Chromium
        "other_user",  # tests/fixtures/users.py: a second local user (useradd)
        "small_disk",  # tests/fixtures/disks.py: a tmpfs mounted to fill
    }
)
# The markers that already say "a server is started for this test" or "not fast".
INTEGRATION_MARKERS = ("sshd", "postgres", "slow")


def mark_integration(items: Iterable[pytest.Item]) -> None:
    """Mark every collected test that uses a service fixture or a service marker."""
    mark = pytest.mark.integration
    for item in items:
        if item.get_closest_marker("integration"):
            continue
        uses = set(getattr(item, "fixturenames", ()))
        if uses & INTEGRATION_FIXTURES or any(
            item.get_closest_marker(name) for name in INTEGRATION_MARKERS
        ):
            item.add_marker(mark)


# What starts a process or opens resplot's window, as the call's dotted name (its last parts).
STARTERS = (
    "subprocess.run",
    "subprocess.Popen",
    "subprocess.check_output",
    "subprocess.check_call",
    "subprocess.call",
    "Popen",
    "os.fork",
    "os.forkpty",
    "os.spawnv",
    "os.posix_spawn",
    "os.system",
    "Process",
    "get_context",
    "Pool",
    "open_window",
    "MainWindow",
)


@dataclass(frozen=True)
class Unmarked:
    path: Path
    test: str
    line: int
    why: str

    def __str__(self) -> str:
        where = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path
        return (
            f"{where}::{self.test} (line {self.line}) {self.why} but is not marked integration: "
            "add `pytestmark = pytest.mark.integration` to its file, or "
            "`@pytest.mark.integration` to the test (docs/architecture.md, 'Tests')"
        )


def _dotted(node: ast.expr) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _is_integration_mark(node: ast.expr) -> bool:
    if isinstance(node, ast.Call):
        node = node.func
    name = _dotted(node)
    return any(name.endswith(f"mark.{m}") for m in ("integration", *INTEGRATION_MARKERS))


def _marked(decorators: list[ast.expr]) -> bool:
    return any(_is_integration_mark(d) for d in decorators)


def _module_marked(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            values = (
                node.value.elts if isinstance(node.value, ast.List | ast.Tuple) else [node.value]
            )
            if any(_is_integration_mark(v) for v in values):
                return True
    return False


class _Module:
    """One Python file under tests/: its functions, what each calls, what it imports."""

    def __init__(self, path: Path, base: Path) -> None:
        self.path = path
        self.name = ".".join(path.relative_to(base).with_suffix("").parts)
        self.tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        self.imported: dict[str, str] = {}  # local name -> "module:name" or "module"
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.called: dict[str, list[tuple[str, int]]] = {}  # function -> (dotted call, line)
        self.asks: dict[str, list[tuple[str, int]]] = {}  # getfixturevalue("x") -> (x, line)
        self._visit(self.tree, [])

    def _visit(self, node: ast.AST, inside: list[str]) -> None:
        """One walk of the tree: a call counts for every function it is written in."""
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                self.imported[a.asname or a.name] = f"{node.module}:{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                self.imported[a.asname or a.name.split(".")[0]] = a.name
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            self.functions.setdefault(node.name, node)
            self.called.setdefault(node.name, [])
            inside = [*inside, node.name]
        elif isinstance(node, ast.Call) and inside:
            call = (_dotted(node.func), node.lineno)
            for name in inside:
                self.called[name].append(call)
            first = node.args[0] if node.args else None
            if (
                call[0].endswith("getfixturevalue")
                and isinstance(first, ast.Constant)
                and first.value in INTEGRATION_FIXTURES
            ):
                for name in inside:
                    self.asks.setdefault(name, []).append((first.value, node.lineno))
        for child in ast.iter_child_nodes(node):
            self._visit(child, inside)

    def resolve(self, dotted: str) -> str | None:
        """The "module:function" a call names, when it is a function under tests/."""
        head, _, rest = dotted.partition(".")
        if not rest and head in self.functions:
            return f"{self.name}:{head}"
        target = self.imported.get(head)
        if target is None:
            return None
        if ":" in target and not rest:
            return target
        if ":" in target:  # `from tests.fixtures import live_logger` then live_logger.start()
            module, name = target.split(":")
            return f"{module}.{name}:{rest}"
        return f"{target}:{rest}" if rest and "." not in rest else None


def _modules(tests: Path) -> dict[str, _Module]:
    found = {}
    for path in sorted(tests.rglob("*.py")):
        if "assets" in path.relative_to(tests).parts:
            continue
        module = _Module(path, tests.parent)
        found[module.name] = module
    return found


def _starts(dotted: str) -> bool:
    if dotted.startswith("psutil."):
        return False  # psutil.Process(pid) reads a process, it starts none
    return any(dotted == s or dotted.endswith("." + s) for s in STARTERS)


def _starters(modules: dict[str, _Module]) -> dict[str, str]:
    """Every "module:function" under tests/ that starts a process, and why (to a fixpoint)."""
    why: dict[str, str] = {}
    callers: list[tuple[str, list[tuple[str, str | None, int]]]] = []
    for module in modules.values():
        for name in module.functions:
            calls = [(d, module.resolve(d), line) for d, line in module.called[name]]
            direct = next(((d, line) for d, _, line in calls if _starts(d)), None)
            if direct is not None:
                why[f"{module.name}:{name}"] = f"calls {direct[0]} (line {direct[1]})"
            else:
                callers.append((f"{module.name}:{name}", [c for c in calls if c[1]]))
    changed = True
    while changed:
        changed = False
        for key, calls in callers:
            if key in why:
                continue
            for dotted, callee, line in calls:
                if callee in why:
                    why[key] = f"calls {dotted} (line {line}), which {why[callee]}"
                    changed = True
                    break
    return why


def _fixture_names(module: _Module) -> dict[str, str]:
    """Fixtures a test of this module can use: its own, and those its conftest imports."""
    names = {}
    for name, fn in module.functions.items():
        decorators = [d.func if isinstance(d, ast.Call) else d for d in fn.decorator_list]
        if any(_dotted(d).endswith("fixture") for d in decorators):
            names[name] = f"{module.name}:{name}"
    return names


def _params_marked(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A parametrized fixture whose params carry marks (`pytest.param(..., marks=...)`)."""
    for d in fn.decorator_list:
        if isinstance(d, ast.Call):
            for kw in d.keywords:
                if kw.arg == "params" and any(
                    isinstance(p, ast.Call) and any(k.arg == "marks" for k in p.keywords)
                    for p in getattr(kw.value, "elts", [])
                ):
                    return True
    return False


def _fixture_reason(
    args: set[str],
    fixtures: dict[str, str],
    modules: dict[str, _Module],
    why: dict[str, str],
    seen: set[str],
) -> str | None:
    """Why one of these fixtures (or a fixture it asks for) starts a process, if one does."""
    for arg in sorted(args - seen):
        seen.add(arg)
        target = fixtures.get(arg)
        if target is None:
            continue
        if target in why:
            return f"uses fixture {arg}, which {why[target]}"
        module, _, name = target.partition(":")
        fn = modules[module].functions.get(name) if module in modules else None
        asks = modules[module].asks.get(name) if module in modules else None
        if fn is not None and asks and not _params_marked(fn):
            service, line = asks[0]
            return (
                f"uses fixture {arg}, which asks for {service} through getfixturevalue "
                f"(line {line}) where collection cannot see it (give that param "
                "`marks=pytest.mark.postgres`, or mark the test)"
            )
        if fn is not None:
            inner = _fixture_reason({a.arg for a in fn.args.args}, fixtures, modules, why, seen)
            if inner is not None:
                return f"uses fixture {arg}, which {inner}"
    return None


def unmarked_starters(tests: Path = TESTS) -> list[Unmarked]:
    """The tests under `tests` (a folder named like its package) that start a process or open
    the window and carry no integration mark."""
    modules = _modules(tests)
    why = _starters(modules)
    conftest = modules.get(f"{tests.name}.conftest")
    shared = {}
    if conftest is not None:
        shared.update(_fixture_names(conftest))
        for local, target in conftest.imported.items():
            if ":" in target:
                shared[local] = target
    found = []
    for module in modules.values():
        if not module.path.name.startswith("test_"):
            continue
        if _module_marked(module.tree):
            continue
        fixtures = {**shared, **_fixture_names(module)}
        for node in module.tree.body:
            tests = []
            if isinstance(node, ast.ClassDef):
                if _marked(node.decorator_list):
                    continue
                tests = [
                    n for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
                ]
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                tests = [node]
            for fn in tests:
                if not fn.name.startswith("test") or _marked(fn.decorator_list):
                    continue
                args = {a.arg for a in fn.args.args}
                if args & INTEGRATION_FIXTURES:
                    continue  # marked at collection by mark_integration
                reason = why.get(f"{module.name}:{fn.name}") or _fixture_reason(
                    args, fixtures, modules, why, set()
                )
                if reason is not None:
                    found.append(Unmarked(module.path, fn.name, fn.lineno, reason))
    return found
