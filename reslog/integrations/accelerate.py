"""Accelerate → reslog: `Accelerator(log_with=ReslogTracker("my-project"))`, then the usual
`accelerator.init_trackers(...)`, `accelerator.log(values, step=...)`, `end_training()`.

`init_trackers(config=...)` becomes the run's config; main process only (`on_main_process`);
`accelerator.get_tracker("reslog", unwrap=True)` is the `reslog.Run`.
"""

from __future__ import annotations

from typing import Any

from accelerate.tracking import GeneralTracker, on_main_process

import reslog


class ReslogTracker(GeneralTracker):
    name = "reslog"
    requires_logging_directory = False
    main_process_only = True

    def __init__(self, run_name: str = "accelerate", **init_kwargs: Any) -> None:
        super().__init__()
        self.run_name = run_name
        self.init_kwargs = init_kwargs
        self.run: Any = None

    @on_main_process
    def start(self) -> None:
        if self.run is None:
            self.run = reslog.init(project=self.run_name, **self.init_kwargs)

    @property
    def tracker(self) -> Any:
        return self.run

    @on_main_process
    def store_init_configuration(self, values: dict) -> None:
        self.run.config.update(values)

    @on_main_process
    def log(self, values: dict, step: int | None = None, **kwargs: Any) -> None:
        self.run.log(values, step=step)

    @on_main_process
    def finish(self) -> None:
        if self.run is not None:
            self.run.finish()
