"""Lightning → reslog: `Trainer(logger=ReslogLogger(project="lm"))`.

`log_hyperparams` (what `save_hyperparameters()` and the Trainer send) updates the run's config
at any time; `log_metrics` logs at Lightning's step; `finalize("success")` finishes the run as
`finished`, `finalize("failed")` (an exception in fit/validate/test) as `failed`. A later
`trainer.test(...)` with the same logger continues the run (reslog's resume). Rank 0 only
(`rank_zero_only`); `logger.experiment` is the `reslog.Run`.
"""

from __future__ import annotations

from argparse import Namespace
from typing import Any

from lightning.pytorch.loggers.logger import Logger, rank_zero_experiment
from lightning.pytorch.utilities.rank_zero import rank_zero_only

import reslog
from schema.store.status import FAILED, FINISHED, KILLED

STATUS = {"success": FINISHED, "finished": FINISHED, "failed": FAILED}


class ReslogLogger(Logger):
    def __init__(self, project: str = "lightning", name: str | None = None, **init_kwargs: Any):
        super().__init__()
        self._project = project
        self._name = name
        self._init_kwargs = init_kwargs
        self._run: Any = None

    @property
    def name(self) -> str:
        return self._project

    @property
    def version(self) -> str | None:
        return None if self._run is None else self._run.uid

    @property
    def save_dir(self) -> str | None:
        return None if self._run is None else self._run.dir

    @property
    @rank_zero_experiment
    def experiment(self) -> Any:
        """The reslog.Run, started on first use (continued if a finalize() ended it)."""
        if self._run is None:
            self._run = reslog.init(project=self._project, name=self._name, **self._init_kwargs)
        elif self._run._status is not None:
            self._run = reslog.init(
                project=self._project, resume=self._run.uid, **self._init_kwargs
            )
        return self._run

    @rank_zero_only
    def log_hyperparams(
        self, params: dict[str, Any] | Namespace, *args: Any, **kwargs: Any
    ) -> None:
        if isinstance(params, Namespace):
            params = vars(params)
        self.experiment.config.update(dict(params or {}))

    @rank_zero_only
    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        self.experiment.log(metrics, step=step)

    @rank_zero_only
    def finalize(self, status: str) -> None:
        if self._run is not None and self._run._status is None:
            self._run.finish(STATUS.get(status, KILLED))
