"""wandb's files and artifacts, kept locally: nothing is uploaded.

- `run.save(glob, base_path=None, policy="live")` copies the matching files into the run's
  file folder, `<run.dir>/files/<uid>/` (run.dir: the SQLite store's folder, or init(dir=)),
  and records each copy as a `file` event (its source, copy, size and SHA-256). policy "now"
  copies at once, "end" at finish(), "live" at once and again at finish() if it changed.
- `Artifact(name, type)` with `add_file`, `add_dir`, `add_reference`, `new_file`, and
  `run.log_artifact(artifact)`: an `artifact` event listing every file with its path, size
  and SHA-256 (references with their URI), the artifact's digest, aliases and metadata. Files
  are referenced where they are; those written with `new_file` (they live in a temporary
  folder) are moved into the run's file folder first.

Copying and hashing run on one worker thread, so a multi-GB checkpoint never stalls the
training loop; finish() waits for it within its time limit.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import hashlib
import json
import os
import queue
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from schema.store.user_files import copy_file

POLICIES = ("live", "now", "end")
_said: set[str] = set()


def say_once(what: str, message: str) -> None:
    """A UserWarning the first time `what` happens in this process."""
    if what in _said:
        return
    _said.add(what)
    warnings.warn(f"reslog: {message}", UserWarning, stacklevel=3)


def sha256_of(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class Artifact:
    """wandb.Artifact: a named, typed set of files, recorded by `run.log_artifact`."""

    def __init__(
        self,
        name: str,
        type: str,
        description: str | None = None,
        metadata: dict[str, Any] | None = None,
        incremental: bool = False,
        use_as: str | None = None,
        **_: Any,
    ) -> None:
        self.name = str(name)
        self.type = str(type)
        self.description = description or ""
        self.metadata: dict[str, Any] = dict(metadata or {})
        self.aliases: list[str] = []
        self.tags: list[str] = []
        self.digest: str | None = None  # set once logged: SHA-256 over the entries
        self.files: list[dict[str, Any]] = []  # {"name", "path"} or {"name", "reference"}
        self._staging: str | None = None

    def add_file(
        self, local_path: str | os.PathLike[str], name: str | None = None, **_: Any
    ) -> dict[str, Any] | None:
        path = os.path.abspath(os.fspath(local_path))
        if not os.path.isfile(path):
            say_once(
                f"artifact-missing:{path}", f"Artifact.add_file: {path} is not a file; skipped"
            )
            return None
        entry = {"name": str(name or os.path.basename(path)), "path": path}
        self.files.append(entry)
        return entry

    def add_dir(
        self, local_path: str | os.PathLike[str], name: str | None = None, **_: Any
    ) -> None:
        root = os.path.abspath(os.fspath(local_path))
        if not os.path.isdir(root):
            say_once(
                f"artifact-missing:{root}", f"Artifact.add_dir: {root} is not a folder; skipped"
            )
            return
        for folder, _dirs, names in sorted(os.walk(root)):
            for file in sorted(names):
                path = os.path.join(folder, file)
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                self.files.append({"name": f"{name}/{rel}" if name else rel, "path": path})

    def add_reference(self, uri: Any, name: str | None = None, **_: Any) -> None:
        text = str(uri)
        self.files.append(
            {"name": str(name or text.rstrip("/").rsplit("/", 1)[-1]), "reference": text}
        )

    @contextlib.contextmanager
    def new_file(self, name: str, mode: str = "x", encoding: str | None = None) -> Iterator[IO]:
        if self._staging is None:
            self._staging = tempfile.mkdtemp(prefix="reslog-artifact-")
        path = os.path.join(self._staging, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, mode, encoding=encoding) as fh:
            yield fh
        self.files.append({"name": str(name), "path": path, "staged": True})

    def add(self, obj: Any, name: str, **_: Any) -> None:
        say_once(
            "artifact-add",
            f"Artifact.add: {type(obj).__name__} objects are not stored (reslog stores numbers, "
            "text and files); add files with add_file/add_dir",
        )

    def save(self, *_: Any, **__: Any) -> None:
        """Uploads in wandb; here log_artifact records it."""

    def wait(self, *_: Any, **__: Any) -> Artifact:
        return self

    def download(self, root: str | None = None, **_: Any) -> str | None:
        say_once(
            "artifact-download",
            "Artifact.download: reslog keeps no copy of an artifact to download; its files are "
            "where the artifact event lists them",
        )
        return root

    def __repr__(self) -> str:
        return f"reslog.Artifact({self.name!r}, type={self.type!r}, {len(self.files)} files)"


def artifact_from(obj: Any, name: str | None, type: str | None) -> Artifact:
    """log_artifact's argument: an Artifact, or a path (a file or a folder)."""
    if isinstance(obj, Artifact):
        if name:
            obj.name = str(name)
        if type:
            obj.type = str(type)
        return obj
    path = os.fspath(obj)
    artifact = Artifact(name or os.path.basename(os.path.abspath(path)), type or "unspecified")
    if os.path.isdir(path):
        artifact.add_dir(path)
    else:
        artifact.add_file(path)
    return artifact


class RunFiles:
    """A run's saved files and logged artifacts, worked on by one daemon thread."""

    def __init__(self, folder: Path, event: Callable[..., None]) -> None:
        self.folder = folder  # <run.dir>/files/<uid>
        self._event = event
        self._jobs: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._at_end: list[tuple[str, str, str]] = []  # (glob, base, policy) for finish()
        self._copied: dict[str, tuple[float, int]] = {}  # source -> (mtime, size) copied
        self._versions: dict[str, int] = {}

    # -- the training thread ----------------------------------------------------------------------

    def save(self, glob_str: str, base_path: str | None, policy: str) -> list[str]:
        if policy not in POLICIES:
            raise ValueError(f"reslog: save(policy=...) must be one of {POLICIES}, got {policy!r}")
        pattern = os.path.expanduser(os.fspath(glob_str))
        if base_path is None:  # wandb's rule: an absolute glob's folder, else here
            base = _fixed_part(os.path.dirname(pattern)) if os.path.isabs(pattern) else "."
        else:
            base = os.fspath(base_path)
        base = os.path.abspath(base)
        if policy in ("end", "live"):
            self._at_end.append((pattern, base, policy))
        if policy == "end":
            return []
        found = _matches(pattern)
        if not found and policy == "now":
            say_once(f"save-none:{pattern}", f"save({glob_str!r}): no file matches it")
        targets = [str(self._target(path, base)) for path in found]
        self._submit(lambda: [self._copy(path, base, policy) for path in found])
        return targets

    def log_artifact(self, artifact: Artifact, aliases: list[str], tags: list[str]) -> None:
        artifact.aliases = list(dict.fromkeys(["latest", *aliases]))
        artifact.tags = list(tags)
        version = self._versions.get(artifact.name, -1) + 1
        self._versions[artifact.name] = version
        self._submit(lambda: self._record_artifact(artifact, version))

    def finish(self, timeout: float) -> bool:
        """The end- and live-policy copies, then every job done within `timeout` s."""
        for pattern, base, policy in self._at_end:
            found = _matches(pattern)
            self._submit(lambda f=found, b=base, p=policy: [self._copy(x, b, p, True) for x in f])
        if self._thread is None:
            return True
        done = threading.Event()
        self._jobs.put(done.set)
        return done.wait(max(0.0, timeout))

    def _submit(self, job: Callable[[], Any]) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="reslog-files", daemon=True)
            self._thread.start()
        self._jobs.put(job)

    # -- the worker thread ------------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                job()
            except Exception as exc:  # never into training: say so (an event) and go on
                self._event("file", f"could not save a file: {exc}"[:2000], level="warning")

    def _target(self, path: str, base: str) -> Path:
        rel = os.path.relpath(path, base)
        if rel.startswith(".."):
            rel = os.path.basename(path)
        return self.folder / rel

    def _copy(self, path: str, base: str, policy: str, at_end: bool = False) -> None:
        stat = os.stat(path)
        seen = (stat.st_mtime, stat.st_size)
        if at_end and self._copied.get(path) == seen:
            return  # "live": unchanged since it was copied
        target = self._target(path, base)
        target.parent.mkdir(parents=True, exist_ok=True)
        # A fresh file renamed over the target (schema.store.user_files), with the source's mode and
        # time as copy2 gave: never written through a link planted in the run's folder.
        copy_file(path, target, file_mode=stat.st_mode & 0o777)
        self._copied[path] = seen
        body = {
            "source": path,
            "copy": str(target),
            "size": stat.st_size,
            "sha256": sha256_of(str(target)),
            "policy": policy,
        }
        title = str(target.relative_to(self.folder))
        self._event("file", title[:2000], body=json.dumps(body))

    def _record_artifact(self, artifact: Artifact, version: int) -> None:
        entries = []
        for entry in artifact.files:
            if "reference" in entry:
                entries.append({"name": entry["name"], "reference": entry["reference"]})
                continue
            path = entry["path"]
            if entry.get("staged"):  # written with new_file into a temporary folder: keep it
                kept = self.folder / "artifacts" / f"{artifact.name}-v{version}" / entry["name"]
                kept.parent.mkdir(parents=True, exist_ok=True)
                _move(path, kept)
                path = entry["path"] = str(kept)
                entry.pop("staged")
            entries.append(
                {
                    "name": entry["name"],
                    "path": path,
                    "size": os.path.getsize(path),
                    "sha256": sha256_of(path),
                }
            )
        h = hashlib.sha256()
        for e in sorted(entries, key=lambda e: e["name"]):
            h.update(f"{e['name']}\0{e.get('sha256') or e.get('reference')}\n".encode())
        artifact.digest = h.hexdigest()
        body = {
            "name": artifact.name,
            "version": f"v{version}",
            "type": artifact.type,
            "description": artifact.description,
            "metadata": artifact.metadata,
            "aliases": artifact.aliases,
            "tags": artifact.tags,
            "digest": artifact.digest,
            "files": entries,
        }
        title = f"artifact {artifact.name}:v{version} ({artifact.type}), {len(entries)} files"
        self._event("artifact", title[:2000], body=json.dumps(body, default=str))


def _fixed_part(pattern: str) -> str:
    """The leading part of a glob without wildcards."""
    parts = Path(pattern).parts
    fixed = []
    for part in parts:
        if any(c in part for c in "*?["):
            break
        fixed.append(part)
    return str(Path(*fixed)) if fixed else "."


def _matches(pattern: str) -> list[str]:
    return sorted(
        os.path.abspath(p) for p in glob.glob(pattern, recursive=True) if os.path.isfile(p)
    )


def _move(source: str, target: Path) -> None:
    """Rename `source` over `target` (a link there is replaced, not followed into, as
    shutil.move would into a folder it names); across file systems, a copy then a removal."""
    try:
        os.replace(source, target)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        copy_file(source, target, file_mode=os.stat(source).st_mode & 0o777)
        os.unlink(source)
