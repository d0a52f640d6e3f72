"""Hugging Face Trainer → reslog: `Trainer(..., callbacks=[ReslogCallback()])`.

Metrics go in as `train/<name>` and `eval/<name>` (`eval_loss` → `eval/loss`, as HF's own
WandbCallback names them; `test_` → `test/`) at `state.global_step`; the tokens seen so far
(`state.num_input_tokens_seen`, with `include_num_input_tokens_seen=True`) as `train/tokens`.
The config is the TrainingArguments plus the model's config under `model` (secrets such as
`hub_token` redacted as any config). The end-of-training statistics (`train_runtime`,
`train_samples_per_second`, `total_flos`, `train_loss`, ...) go into the summary. Rank 0 only
(`state.is_world_process_zero`). A run already started with `reslog.init` is used as is;
otherwise one is started at the first callback (`on_train_begin`, or the `evaluate()` /
`predict()` of a Trainer that never trained). As HF's own WandbCallback, the run stays open
after `train()`, so a later `trainer.evaluate()` (`eval/*`) or `trainer.predict()` (`test/*`)
lands in the same run, and it is finished at process exit (reslog's exit hooks: `finished`,
or `failed` with the traceback as an alert when the script raises); a hyper-parameter search
finishes each trial's run and starts the next one.
"""

from __future__ import annotations

import os
from typing import Any

from transformers import TrainerCallback

import reslog

SUMMARY_KEYS = frozenset(
    {
        "train_runtime",
        "train_samples_per_second",
        "train_steps_per_second",
        "train_loss",
        "total_flos",
    }
)
PREFIXES = (("eval_", "eval/"), ("test_", "test/"))


def rewrite(logs: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in logs.items():
        for old, new in PREFIXES:
            if key.startswith(old):
                out[new + key[len(old) :]] = value
                break
        else:
            out["train/" + key] = value
    return out


class ReslogCallback(TrainerCallback):
    """Log a `transformers.Trainer` run into reslog. `init_kwargs` go to `reslog.init`
    (`project` defaults to $RESLOG_PROJECT, else "huggingface"; `name` to `args.run_name`)."""

    def __init__(self, **init_kwargs: Any) -> None:
        self.init_kwargs = init_kwargs
        self.run: Any = None
        self._owned = False

    def _start(self, args, state, model) -> None:
        if self.run is not None and getattr(self.run, "_status", None) is None:
            return
        current = reslog.run
        if current is not None:
            self.run, self._owned = current, False
        else:
            kw = dict(self.init_kwargs)
            kw.setdefault("project", os.environ.get("RESLOG_PROJECT", "huggingface"))
            if getattr(args, "run_name", None):
                kw.setdefault("name", args.run_name)
            self.run, self._owned = reslog.init(**kw), True
        config: dict[str, Any] = dict(args.to_dict())
        model_config = getattr(model, "config", None)
        if model_config is not None and hasattr(model_config, "to_dict"):
            config["model"] = model_config.to_dict()
        if model is not None and hasattr(model, "num_parameters"):
            config["model/num_parameters"] = model.num_parameters()
        self.run.config.update(config)

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if not state.is_world_process_zero:
            return
        if state.is_hyper_param_search and self._owned and self.run is not None:
            self.run.finish()  # each trial is a run of its own, as WandbCallback does
            self.run = None
        self._start(args, state, model)

    def on_log(self, args, state, control, logs=None, model=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        self._start(args, state, model)  # a no-op while its run is open
        metrics = {k: v for k, v in logs.items() if k not in SUMMARY_KEYS}
        ended = {k: v for k, v in logs.items() if k in SUMMARY_KEYS}
        if ended:
            self.run.summary.update(ended)
        if metrics:
            record = rewrite(metrics)
            if state.num_input_tokens_seen:
                record["train/tokens"] = state.num_input_tokens_seen
            self.run.log(record, step=state.global_step)

    def on_train_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero and self.run is not None:
            self.run.summary["global_step"] = state.global_step

    def on_predict(self, args, state, control, metrics=None, model=None, **kwargs):
        """`trainer.predict()`'s metrics (`test_loss`, ... → `test/loss`) at the global step."""
        if not state.is_world_process_zero or not metrics:
            return
        self._start(args, state, model)  # a no-op while its run is open
        self.run.log(rewrite(metrics), step=state.global_step)
