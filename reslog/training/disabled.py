"""`reslog.init(mode="disabled")`: a run whose every call does nothing and writes nothing.

Same surface as reslog.training.run.Run, so training code needs no `if` around its logging.
No store is opened, no file or folder is created, no thread is started.
"""

from __future__ import annotations

import contextlib
from typing import Any

_current: list[DisabledRun] = []


def current() -> DisabledRun | None:
    return _current[-1] if _current else None


class DisabledRun:
    def __init__(self, project: str, name: str | None, config: Any, uid: str | None) -> None:
        import uuid  # its import loads `platform`: a tenth of `reslog ls`'s start

        self.uid = uid or uuid.uuid4().hex
        self.project = project
        self.name = name or f"{project}-disabled-{self.uid[:4]}"
        from reslog.training.config import Config, config_dict  # not at `import reslog`

        self.config = Config(config_dict(config))
        self.summary: dict[str, Any] = {}
        self.group = self.job_type = ""
        self.rank, self.world_size = 0, 1
        self.store = ""
        self.step = 0
        self.disabled = True
        _current.append(self)

    id = property(lambda self: self.uid)
    dir = property(lambda self: "")
    url = property(lambda self: "")

    def log(self, metrics: Any, step: int | None = None, commit: bool | None = None) -> None:
        pass

    def timer(self, name: str) -> contextlib.nullcontext:
        return contextlib.nullcontext()

    def event(self, *args: Any, **kwargs: Any) -> None:
        pass

    def alert(self, *args: Any, **kwargs: Any) -> None:
        pass

    def define_metric(self, *args: Any, **kwargs: Any) -> None:
        pass

    def watch(self, *args: Any, **kwargs: Any) -> None:
        pass

    def unwatch(self, *args: Any, **kwargs: Any) -> None:
        pass

    def _label(self, **_: Any) -> None:
        pass

    def save(self, *args: Any, **kwargs: Any) -> list[str]:
        return []

    def log_artifact(self, artifact_or_path: Any, name: Any = None, type: Any = None, **_: Any):
        from reslog.training.artifacts import artifact_from

        return artifact_from(artifact_or_path, name, type)

    def mark_preempting(self) -> None:
        pass

    def finish(self, *args: Any, **kwargs: Any) -> bool:
        if self in _current:
            _current.remove(self)
        return True

    def __enter__(self) -> DisabledRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish()

    def __repr__(self) -> str:
        return f"<reslog.DisabledRun {self.project}/{self.name}>"
