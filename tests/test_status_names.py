"""Run statuses and alert kinds are spelled once: schema/store/status.py holds the statuses (the
strings stores on disk hold), schema/rules/alerts.py the alert kinds; library code uses the
names."""

from __future__ import annotations

import ast
from pathlib import Path

from schema.rules import alerts
from schema.store import status

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("schema", "reslog", "resplot", "trainer")
# shipped migrations: never edited
SHIPPED = ROOT / "schema" / "store" / "migrations" / "versions"
# Alert kinds whose word means nothing else in the code ("nan" is also a float, "alert" an
# event kind), and the kinds' old names (alerts.RENAMED).
ALERT_WORDS = {
    alerts.QUIET,
    alerts.THROTTLED,
    alerts.GPU_UTIL_DROP,
    alerts.GPU_TEMP,
    alerts.STRAGGLER,
    alerts.STRAGGLER_END,
    alerts.HANG,
    *(old for old in alerts.RENAMED if old != "logged"),
}
TABLES = {
    ROOT / "schema" / "store" / "status.py": set(status.STATUSES),
    ROOT / "schema" / "rules" / "alerts.py": ALERT_WORDS,
}
# Words that are another program's, not ours: Lightning's finalize() statuses, mapped to ours.
FOREIGN = {
    (ROOT / "reslog" / "integrations" / "lightning.py", "finished"),
    (ROOT / "reslog" / "integrations" / "lightning.py", "failed"),
}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def spelled(path: Path, words: set[str]) -> list[str]:
    """`path:line 'word'` for each string literal in the file that is one of the words."""
    tree = ast.parse(path.read_text(), filename=str(path))
    docs = _docstrings(tree)
    shown = path.relative_to(ROOT) if ROOT in path.parents else path.name
    return [
        f"{shown}:{node.lineno} {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value in words
        and id(node) not in docs
        and (path, node.value) not in FOREIGN
    ]


def library_files() -> list[Path]:
    return [
        p
        for pkg in PACKAGES
        for p in sorted((ROOT / pkg).rglob("*.py"))
        if SHIPPED not in p.parents and ".venv" not in p.parts
    ]


def test_status_names_and_alert_kinds_are_spelled_only_in_their_tables():
    words = set(status.STATUSES) | ALERT_WORDS
    found = [hit for p in library_files() if p not in TABLES for hit in spelled(p, words)]
    assert found == [], (
        "use schema.store.status / schema.rules.alerts names instead of:\n" + "\n".join(found)
    )


def test_the_scan_sees_a_literal_and_the_tables_hold_every_word(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text('"""Says "running" in its docstring."""\nx = "crashed"\ny = "quiet"\n')
    assert spelled(probe, set(status.STATUSES) | ALERT_WORDS) == [
        "probe.py:2 'crashed'",
        "probe.py:3 'quiet'",
    ]
    for table, words in TABLES.items():
        assert {hit.rsplit(" ", 1)[1].strip("'") for hit in spelled(table, words)} == words


def test_stored_strings_stay_as_stores_on_disk_hold_them():
    assert status.RUN_STATUSES == ("running", "finished", "failed", "killed", "crashed")
    assert status.STALLED == "stalled" and status.STALLED not in status.RUN_STATUSES
    assert set(status.LIVE_STATUSES) | set(status.END_STATUSES) | {status.CRASHED} == set(
        status.STATUSES
    )
    assert set(status.ENDED_BADLY) <= set(status.RUN_STATUSES)
    assert set(status.STATUSES) <= set(alerts.KINDS)  # every status a run shows is a kind too
