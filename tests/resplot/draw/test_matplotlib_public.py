"""resplot uses matplotlib's public API only: no module imports a private matplotlib module
or name, or reaches a private attribute of a matplotlib object (the glyph cache did, and
silently turned itself off on the next minor version).

The check is by name: every private name (one leading underscore) that matplotlib defines in
its sources and stubs (functions, classes, attributes it assigns) is looked for in resplot's
code as an attribute (`obj._name`), a `getattr`/`hasattr`/`setattr` string, or an import. An
attribute on `self` or `cls` counts only where resplot does not define that name itself (its
own `self._layout` is its own)."""

from __future__ import annotations

import ast
import functools
import importlib
from pathlib import Path

import matplotlib

ROOT = Path(__file__).resolve().parents[3]
MPL = Path(matplotlib.__file__).parent


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def defined_names(files) -> set[str]:
    """Private names a body of code defines: functions, classes, assigned attributes and
    names (module, class and instance level)."""
    out: set[str] = set()
    for path in files:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                out.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                out.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                out.add(node.id)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                out.add(node.target.id)
    return {n for n in out if _private(n)}


def compiled_names() -> set[str]:
    """Private names of matplotlib's compiled modules and their classes (not all in stubs:
    FT2Font._render_glyph is not)."""
    out: set[str] = set()
    for lib in MPL.rglob("*.so"):
        parts = lib.relative_to(MPL.parent).with_suffix("").parts
        name = ".".join(parts).split(".cpython")[0].split(".abi3")[0]
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        for attr in dir(module):
            out.add(attr)
            value = getattr(module, attr)
            if isinstance(value, type):
                out.update(dir(value))
    return {n for n in out if _private(n)}


# A named tuple's own methods: public API that starts with an underscore so that it cannot
# clash with a field name (matplotlib defines a `_replace` too, which is how it got here).
NAMEDTUPLE_API = frozenset({"_replace", "_asdict", "_make", "_fields", "_field_defaults"})


@functools.cache
def matplotlib_private_names() -> frozenset[str]:
    # matplotlib/tests/ defines names of its own tests, not of matplotlib: a third of the files.
    files = [p for p in (*MPL.rglob("*.py"), *MPL.rglob("*.pyi")) if "tests" not in p.parts]
    names = defined_names(files) | compiled_names()
    return frozenset(names - NAMEDTUPLE_API)


def uses(path: Path, mpl: set[str], own: set[str]) -> list[str]:
    """Where one file reaches matplotlib's private names: 'file:line what' each."""
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    where = path.relative_to(ROOT)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and node.attr in mpl:
            on_self = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            if not on_self or node.attr not in own:
                found.append(f"{where}:{node.lineno} .{node.attr}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in ("getattr", "hasattr", "setattr", "delattr") and node.args[1:]:
                arg = node.args[1]
                text = arg.value if isinstance(arg, ast.Constant) else None
                if isinstance(text, str) and _private(text) and text in mpl and text not in own:
                    found.append(f"{where}:{node.lineno} {node.func.id}(…, {text!r})")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("matplotlib"):
            parts = node.module.split(".")
            names = [a.name for a in node.names]
            if any(_private(p) for p in parts) or any(_private(n) for n in names):
                found.append(f"{where}:{node.lineno} from {node.module} import {names}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "matplotlib" and any(_private(p) for p in parts):
                    found.append(f"{where}:{node.lineno} import {alias.name}")
    return found


def scan(files: list[Path]) -> list[str]:
    mpl = matplotlib_private_names()
    own = defined_names(files)
    return [hit for path in files for hit in uses(path, mpl, own)]


def test_no_resplot_module_uses_a_private_matplotlib_name():
    files = sorted((ROOT / "resplot").rglob("*.py"))
    assert files
    found = scan(files)
    assert not found, "private matplotlib names used:\n" + "\n".join(found)


def test_the_check_finds_what_the_glyph_cache_used():
    # resplot/draw/text_cache.py as it was before issue 31 (kept as a test asset), and the
    # bitmap legend's removal hook of then: each private name it reached is found.
    old = ROOT / "tests" / "assets" / "text_cache_before_issue31.py"
    found = "\n".join(uses(old, matplotlib_private_names(), defined_names([old])))
    for name in ("_find_fonts_by_props", "_layout", "_renderer", "_render_glyph", "_set_transform"):
        assert f".{name}" in found, (name, found)
    assert "_layout" in defined_names([ROOT / "resplot" / "draw" / "charts.py"])  # its own


def test_the_check_finds_private_imports_and_hooks():
    sample = ROOT / "tests" / "assets" / "private_matplotlib_sample.py"
    found = "\n".join(uses(sample, matplotlib_private_names(), defined_names([sample])))
    for what in (
        "._remove_method",
        "matplotlib import ['_api']",
        "import matplotlib._path",
        "hasattr(…, '_render_glyph')",
    ):
        assert what in found, (what, found)
