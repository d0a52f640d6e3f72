"""`reslog import csv FILE`: points from a CSV table, long or wide.

- long: a `key` and a `value` column, and a `step` column (reslog's own `export --format csv`
  reads back: run, uid, key, step, wall, value);
- wide: a `step` column and one column per key (reslog's `csv-wide`, pandas' `to_csv`).

Optional columns: `wall` (Unix seconds; else the file's modification time) and `run` (one run
per distinct value; else one run named `--name` or the file's stem). Empty cells are skipped;
`nan`, `inf` and `-inf` are values. Anything else that is not a number is an error naming the
file, line and column, before anything is written.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

from reslog.tools.importers import ImportError_, open_regular, shown
from reslog.tools.importers.runs import ImportedRun

META = ("run", "uid", "step", "wall", "key", "value")


def read_csv(path: Path, project: str, name: str | None) -> list[ImportedRun]:
    path = path.resolve()
    fd = open_regular(path)  # a FIFO is refused, not waited on
    default_wall = os.fstat(fd).st_mtime
    where = shown(path)
    with open(fd, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        try:
            header = next(reader)
        except StopIteration:
            raise ImportError_(f"{where}: empty file") from None
        except (csv.Error, UnicodeDecodeError) as exc:
            raise ImportError_(f"{where}: not a CSV file ({exc})") from None
        cols = {h.strip(): i for i, h in enumerate(header)}
        if "step" not in cols:
            raise ImportError_(f"{where}: no 'step' column (header: {', '.join(header)[:200]})")
        long = "key" in cols and "value" in cols
        default_name = name or path.stem
        runs: dict[str, ImportedRun] = {}
        i_step, i_wall, i_run = cols["step"], cols.get("wall"), cols.get("run")
        value_cols = [(h, i) for h, i in cols.items() if h not in META]
        line = 1
        try:
            for line, row in enumerate(reader, start=2):
                if not row:
                    continue
                if len(row) != len(header):
                    raise ImportError_(
                        f"{where}:{line}: {len(row)} cells, the header has {len(header)}"
                    )
                run_name = row[i_run] if i_run is not None and row[i_run] else default_name
                run = runs.get(run_name)
                if run is None:
                    source = f"csv:{path}#{run_name}"
                    run = runs[run_name] = ImportedRun(source, project, shown(run_name))
                    run.notes = f"imported from {where}"
                step = _int(row[i_step], path, line, "step")
                wall = _float(row[i_wall], path, line, "wall") if i_wall is not None else None
                wall = default_wall if wall is None else wall
                if long:
                    value = _float(row[cols["value"]], path, line, "value")
                    if value is not None:
                        run.add(row[cols["key"]], step, wall, value)
                else:
                    for key, i in value_cols:
                        value = _float(row[i], path, line, key)
                        if value is not None:
                            run.add(key, step, wall, value)
        except csv.Error as exc:
            raise ImportError_(f"{where}:{line}: {exc}") from None
        except UnicodeDecodeError:
            raise ImportError_(f"{where}:{line}: not UTF-8 text") from None
    return list(runs.values())


def _float(cell: str, path: Path, line: int, column: str) -> float | None:
    cell = cell.strip()
    if not cell:
        return None
    try:
        return float(cell)
    except ValueError:
        raise ImportError_(
            f"{shown(path)}:{line}: column {column!r}: {cell[:40]!r} is not a number"
        ) from None


def _int(cell: str, path: Path, line: int, column: str) -> int:
    text = cell.strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        f = float(text)
        if f.is_integer():
            return int(f)
    except (ValueError, OverflowError):
        pass
    raise ImportError_(f"{shown(path)}:{line}: {column} {text[:40]!r} is not an integer")
