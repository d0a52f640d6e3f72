"""`reslog import tensorboard|wandb|csv`: bring history written by other tools into a store.

Each importer reads its input completely (a bad or truncated file is an ImportError_ naming the
file, before anything is written), then writes each run in one transaction (runs.write_run):
nothing is ever half-imported. A run's uid is derived from what it came from,
so importing the same input again finds it and skips it.
"""

from __future__ import annotations


class ImportError_(Exception):  # not the builtin ImportError
    """Bad input: the message is one line that names the file."""
