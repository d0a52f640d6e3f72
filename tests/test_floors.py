"""The floors of the code, as docs/architecture.md draws them, checked on every import statement
(lazy ones inside functions included): a module may import its own floor and the floors under
it, never one above. A violation names the file, the line and the import, so the fix is obvious.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

QT = ("PyQt5", "PyQt6", "PySide2", "PySide6", "matplotlib.backends.backend_qt")
MATPLOTLIB = ("matplotlib",)
DESKTOP = ("resplot",)

# folder -> module prefixes nothing under it may import
FLOORS: dict[str, tuple[str, ...]] = {
    "schema": ("reslog", "resplot", "trainer", *QT, *MATPLOTLIB, "paramiko", "torch"),
    # The store never imports the rules read over it (records carry a run's status: the store's).
    "schema/store": ("schema.rules",),
    # The rules judge records already read: plain Python, no database.
    "schema/rules": ("sqlalchemy",),
    "reslog": ("resplot", "trainer", *QT, *MATPLOTLIB, "paramiko"),
    "reslog/training": ("reslog.tools", "resplot", *QT, *MATPLOTLIB, "paramiko", "pandas"),
    "reslog/agent": ("reslog.training", "reslog.tools", "resplot", "sqlalchemy", "numpy"),
    "resplot/data": (
        *QT,
        *MATPLOTLIB,
        "paramiko",
        "sqlalchemy",
        "resplot.draw",
        "resplot.ui",
        "resplot.sources",
        "resplot.ssh",
        "resplot.cli",
        "resplot.cli_sources",
        "resplot.headless_cmds",
        "resplot.report",
    ),
    "resplot/draw": (*QT, "paramiko", "resplot.ui", "resplot.sources", "resplot.ssh"),
    "resplot/sources": (*QT, *MATPLOTLIB, "resplot.draw", "resplot.ui"),
    "resplot/ssh": (*QT, *MATPLOTLIB, "resplot.data", "resplot.draw", "resplot.ui"),
    "trainer": ("resplot", *QT, *MATPLOTLIB),
}


def imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) of every absolute import in a file: `from a.b import c` gives `a.b.c`,
    so that importing a submodule by name is seen as importing it."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                yield node.lineno, f"{node.module}.{alias.name}"


def _banned(module: str, prefixes: tuple[str, ...]) -> str | None:
    for prefix in prefixes:
        if module == prefix or module.startswith(prefix + "."):
            return prefix
    return None


@pytest.mark.parametrize("floor", sorted(FLOORS))
def test_no_module_imports_a_floor_above_its_own(floor: str) -> None:
    files = sorted((ROOT / floor).rglob("*.py"))
    assert files, f"{floor} holds no Python files: is FLOORS out of date?"
    broken = [
        f"{path.relative_to(ROOT)}:{line} imports {module} ({prefix} is above {floor})"
        for path in files
        for line, module in imports(path)
        if (prefix := _banned(module, FLOORS[floor]))
    ]
    assert not broken, "\n".join(broken)


def test_the_guard_sees_a_violation(tmp_path: Path) -> None:
    # The check above passes vacuously if `imports` finds nothing; show it finds a lazy one.
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from PyQt5.QtWidgets import QWidget\n    return QWidget\n")
    found = list(imports(bad))
    assert found == [(2, "PyQt5.QtWidgets.QWidget")]
    assert _banned(found[0][1], FLOORS["resplot/data"]) == "PyQt5"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _runtime_imports(path: Path, known: set[str]) -> set[str]:
    """Our modules a file imports at run time, lazily inside functions too (a lazy import back
    up is still a circle: it only hides it from the interpreter); `if TYPE_CHECKING:` blocks are
    left out, since they never run."""
    tree = ast.parse(path.read_text(), filename=str(path))
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for child in node.body for n in ast.walk(child))
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
    return found


def test_no_import_circle() -> None:
    files = {
        _module_name(p): p
        for pkg in ("schema", "reslog", "resplot", "trainer")
        for p in (ROOT / pkg).rglob("*.py")
    }
    known = set(files)
    graph = {mod: _runtime_imports(path, known) - {mod} for mod, path in files.items()}
    # A package's __init__ importing its own submodules is how packages work, not a circle.
    for mod, deps in graph.items():
        graph[mod] = {d for d in deps if not mod.startswith(d + ".")}
    seen: dict[str, int] = {}  # 1: on the current path, 2: done
    circles: list[list[str]] = []

    def visit(mod: str, path: list[str]) -> None:
        seen[mod] = 1
        for dep in sorted(graph[mod]):
            if seen.get(dep) == 1:
                circles.append([*path[path.index(dep) :], dep])
            elif dep not in seen:
                visit(dep, [*path, dep])
        seen[mod] = 2

    for mod in sorted(graph):
        if mod not in seen:
            visit(mod, [mod])
    assert not circles, "import circles:\n" + "\n".join(" -> ".join(c) for c in circles)
