"""Accelerate → reslog: `Accelerator(log_with=ReslogTracker())`, then the usual
`accelerator.init_trackers("project", config=...)`, `accelerator.log(values, step=...)`,
`end_training()`.

`init_trackers`' project name is the run's project and `init_kwargs["reslog"]` go to
`reslog.init` (over the constructor's keywords): Accelerate hands neither to a tracker object
the user built, so ReslogTracker reads them from the `init_trackers` call that starts it.
Without one (an Accelerate that does not call `start()` from there), the constructor's
`run_name` (default "accelerate") is the project. `init_trackers(config=...)` becomes the
run's config; main process only (`on_main_process`);
`accelerator.get_tracker("reslog", unwrap=True)` is the `reslog.Run`.
"""

from __future__ import annotations

import sys
from typing import Any

from accelerate.tracking import GeneralTracker, on_main_process

import reslog


def _init_trackers_call() -> tuple[str | None, dict[str, Any]]:
    """(project_name, init_kwargs["reslog"]) of the Accelerator.init_trackers call on the
    stack, or (None, {})."""
    frame = sys._getframe(1)
    for _ in range(12):
        if frame is None:
            break
        if frame.f_code.co_name == "init_trackers" and "project_name" in frame.f_locals:
            name = frame.f_locals["project_name"]
            kwargs = (frame.f_locals.get("init_kwargs") or {}).get("reslog") or {}
            return (str(name) if name else None), dict(kwargs)
        frame = frame.f_back
    return None, {}


class ReslogTracker(GeneralTracker):
    name = "reslog"
    requires_logging_directory = False
    main_process_only = True

    def __init__(self, run_name: str | None = None, **init_kwargs: Any) -> None:
        super().__init__()
        self.run_name = run_name
        self.init_kwargs = init_kwargs
        self.run: Any = None

    @on_main_process
    def start(self) -> None:
        if self.run is not None:
            return
        project, kwargs = _init_trackers_call()
        project = project or self.run_name or "accelerate"
        self.run_name = project
        self.run = reslog.init(project=project, **{**self.init_kwargs, **kwargs})

    @property
    def tracker(self) -> Any:
        return self.run

    @on_main_process
    def store_init_configuration(self, values: dict) -> None:
        if self.run is None:
            self.start()
        self.run.config.update(values)

    @on_main_process
    def log(self, values: dict, step: int | None = None, **kwargs: Any) -> None:
        if self.run is None:
            self.start()
        self.run.log(values, step=step)

    @on_main_process
    def finish(self) -> None:
        if self.run is not None:
            self.run.finish()
