"""Typed, nested training configuration: TOML file + ``--section.key value`` overrides.

    cfg = load_config("trainer/configs/demo.toml", ["--optim.lr", "1e-3", "--steps", "200"])
    cfg.to_dict()    # the resolved config: goes into the reslog run and every checkpoint

A short ``--key value`` works when the key exists in exactly one section. Every error names the
flag that caused it (``--optim.lr=-1: must be > 0``).
"""

from __future__ import annotations

import dataclasses
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainer import kernels
from trainer.model import ModelConfig, ModelConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - python 3.10
    import tomli as tomllib


class ConfigError(ValueError):
    """A bad setting; the message starts with the flag that sets it."""


def _check(ok: bool, flag: str, value: Any, why: str) -> None:
    if not ok:
        raise ConfigError(f"--{flag}={value!r}: {why}")


@dataclass
class DataConfig:
    dir: str = ""  # prepared directory (python -m trainer.prepare); "" with source=synthetic
    source: str = "shards"  # shards | synthetic (a learnable random Markov stream, no files)
    batch_size: int = 8  # sequences per micro-batch per rank
    seq_len: int = 256
    grad_accum: int = 1  # micro-batches per optimizer step
    prefetch: int = 2

    def __post_init__(self) -> None:
        _check(
            self.source in ("shards", "synthetic"),
            "data.source",
            self.source,
            "must be 'shards' or 'synthetic'",
        )
        _check(
            self.source != "shards" or bool(self.dir),
            "data.dir",
            self.dir,
            "is required with --data.source=shards (a directory made by trainer.prepare)",
        )
        for f in ("batch_size", "seq_len", "grad_accum"):
            _check(getattr(self, f) > 0, f"data.{f}", getattr(self, f), "must be > 0")
        _check(self.prefetch >= 0, "data.prefetch", self.prefetch, "must be >= 0")


@dataclass
class OptimConfig:
    lr: float = 3e-4
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    grad_clip: float = 1.0  # 0 disables clipping (the norm is still logged)
    fused: str = "auto"  # auto (fused on CUDA and CPU) | true | false

    def __post_init__(self) -> None:
        _check(self.lr > 0, "optim.lr", self.lr, "must be > 0")
        _check(self.weight_decay >= 0, "optim.weight_decay", self.weight_decay, "must be >= 0")
        for f in ("beta1", "beta2"):
            _check(0 <= getattr(self, f) < 1, f"optim.{f}", getattr(self, f), "must be in [0, 1)")
        _check(self.eps > 0, "optim.eps", self.eps, "must be > 0")
        _check(self.grad_clip >= 0, "optim.grad_clip", self.grad_clip, "must be >= 0")
        _check(
            self.fused in ("auto", "true", "false"),
            "optim.fused",
            self.fused,
            "must be auto, true or false",
        )


@dataclass
class ScheduleConfig:
    kind: str = "cosine"  # cosine | wsd | constant
    warmup_steps: int = 100
    min_lr_ratio: float = 0.1  # final lr = lr * min_lr_ratio (cosine, wsd)
    decay_frac: float = 0.2  # wsd: fraction of all steps spent in the final decay

    def __post_init__(self) -> None:
        _check(
            self.kind in ("cosine", "wsd", "constant"),
            "schedule.kind",
            self.kind,
            "must be cosine, wsd or constant",
        )
        _check(self.warmup_steps >= 0, "schedule.warmup_steps", self.warmup_steps, "must be >= 0")
        _check(
            0 <= self.min_lr_ratio <= 1,
            "schedule.min_lr_ratio",
            self.min_lr_ratio,
            "must be in [0, 1]",
        )
        _check(
            0 <= self.decay_frac <= 1, "schedule.decay_frac", self.decay_frac, "must be in [0, 1]"
        )


@dataclass
class TrainSection:
    steps: int = 1000
    # Stop cleanly (final validation and checkpoint) after this much wall time; 0: no limit.
    # The schedule still spans `steps`, so a budget-cut run ends before its decay finishes.
    max_minutes: float = 0.0
    seed: int = 1337
    device: str = "auto"  # auto | cpu | cuda
    dtype: str = "auto"  # auto (bf16 autocast on CUDA, fp32 on CPU) | bf16 | fp32
    compile: bool = False
    threads: int = 0  # torch.set_num_threads on CPU; 0 leaves torch's default
    eval_every: int = 0  # steps between validations; 0 disables
    eval_batches: int = 8
    ckpt_every: int = 0  # steps between checkpoints; 0: only at the end
    ckpt_dir: str = "checkpoints"
    keep_last: int = 3
    save_final: bool = True

    def __post_init__(self) -> None:
        _check(self.steps > 0, "train.steps", self.steps, "must be > 0")
        _check(self.max_minutes >= 0, "train.max_minutes", self.max_minutes, "must be >= 0")
        _check(
            self.device in ("auto", "cpu", "cuda"),
            "train.device",
            self.device,
            "must be auto, cpu or cuda",
        )
        _check(
            self.dtype in ("auto", "bf16", "fp32"),
            "train.dtype",
            self.dtype,
            "must be auto, bf16 or fp32",
        )
        for f in ("threads", "eval_every", "ckpt_every"):
            _check(getattr(self, f) >= 0, f"train.{f}", getattr(self, f), "must be >= 0")
        _check(self.eval_batches > 0, "train.eval_batches", self.eval_batches, "must be > 0")
        _check(self.keep_last > 0, "train.keep_last", self.keep_last, "must be > 0")


@dataclass
class LoggingConfig:
    enabled: bool = True  # false (or --no-log): the no-op logger
    project: str = "trainer"
    name: str = ""  # "" lets reslog choose
    store: str = ""  # SQLite path or SQLAlchemy URL; "" = reslog's default (runs/reslog.db)
    log_every: int = 1  # steps between scalar logs
    system: bool = True  # host/GPU telemetry (one sampler per host)
    system_interval: float = 1.0
    flush_interval: float = 1.0
    tags: list[str] = field(default_factory=list)
    notes: str = ""
    print_every: int = 10  # steps between console lines (rank 0); 0 disables
    # Under torchrun: every rank logs its own run of the job (its step phases, time/*); false
    # logs rank 0 only (plus one telemetry run per host).
    every_rank: bool = True
    group: str = ""  # the job id joining the ranks' runs; "" = torchrun's run id, else a new one
    stall_after: float | None = None  # seconds without a step before a stall event; None =
    # reslog's rule (max(5 min, 20 x the median step interval)), 0 = off

    def __post_init__(self) -> None:
        _check(self.log_every > 0, "logging.log_every", self.log_every, "must be > 0")
        _check(
            self.system_interval > 0, "logging.system_interval", self.system_interval, "must be > 0"
        )
        _check(
            self.flush_interval > 0, "logging.flush_interval", self.flush_interval, "must be > 0"
        )
        _check(self.print_every >= 0, "logging.print_every", self.print_every, "must be >= 0")
        _check(
            self.stall_after is None or self.stall_after >= 0,
            "logging.stall_after",
            self.stall_after,
            "must be none (reslog's rule), 0 (off) or seconds > 0",
        )


@dataclass
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    train: TrainSection = field(default_factory=TrainSection)
    logging: LoggingConfig = field(default_factory=LoggingConfig)

    def __post_init__(self) -> None:
        if self.model.max_seq_len < self.data.seq_len:
            raise ConfigError(
                f"--data.seq_len={self.data.seq_len}: longer than "
                f"--model.max_seq_len={self.model.max_seq_len}"
            )
        # Kernels that cannot run under the asked device or dtype: said now, not at step 0.
        attn, t = self.model.attention, self.train
        if ("attention", attn) in kernels.CUDA_ONLY and t.device == "cpu":
            raise ConfigError(f"--model.attention={attn!r}: runs on CUDA only (--train.device=cpu)")
        if ("attention", attn) in kernels.HALF_ONLY and t.dtype == "fp32":
            raise ConfigError(
                "--model.attention='flash': flash-attn has no fp32 kernel; "
                "use --train.dtype bf16 or another backend (sdpa, xformers)"
            )

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return dataclasses.asdict(self)

    @property
    def tokens_per_step(self) -> int:
        """Tokens per optimizer step on one rank."""
        return self.data.batch_size * self.data.seq_len * self.data.grad_accum


SECTIONS: dict[str, type] = typing.get_type_hints(Config)


# --------------------------------------------------------------------------- building


def _coerce(flag: str, value: Any, tp: Any) -> Any:
    """Turn a TOML value or a command-line string into the field's declared type."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):  # Optional[X]
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
            return None
        return _coerce(flag, value, args[0])
    if origin is list:
        (item,) = typing.get_args(tp)
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, list):
            raise ConfigError(f"--{flag}={value!r}: expected a list")
        return [_coerce(flag, v, item) for v in value]
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "1", "yes", "on"):
            return True
        if isinstance(value, str) and value.lower() in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"--{flag}={value!r}: expected true or false")
    if tp is int:
        if isinstance(value, bool):
            raise ConfigError(f"--{flag}={value!r}: expected an integer")
        if isinstance(value, int):
            return value
        try:
            f = float(value) if isinstance(value, (str, float)) else None
        except ValueError:
            f = None
        if f is None or not f.is_integer():
            raise ConfigError(f"--{flag}={value!r}: expected an integer")
        return int(f)
    if tp is float:
        if isinstance(value, bool):
            raise ConfigError(f"--{flag}={value!r}: expected a number")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"--{flag}={value!r}: expected a number") from None
    if tp is str:
        if not isinstance(value, (str, int, float)):
            raise ConfigError(f"--{flag}={value!r}: expected a string")
        return str(value)
    raise ConfigError(f"--{flag}: unsupported field type {tp}")


def from_dict(data: dict[str, Any], source: str = "config") -> Config:
    """Build a validated Config from ``{section: {key: value}}``; unknown names are errors."""
    sections = {}
    for name, values in data.items():
        if name not in SECTIONS:
            raise ConfigError(
                f"unknown section [{name}] in {source} (known: {', '.join(SECTIONS)})"
            )
        if not isinstance(values, dict):
            raise ConfigError(f"[{name}] in {source} must be a table of key = value")
        cls = SECTIONS[name]
        hints = typing.get_type_hints(cls)
        kwargs = {}
        for key, value in values.items():
            if key not in hints:
                raise ConfigError(
                    f"--{name}.{key}: unknown key in {source} (known: {', '.join(hints)})"
                )
            kwargs[key] = _coerce(f"{name}.{key}", value, hints[key])
        try:
            sections[name] = cls(**kwargs)
        except ModelConfigError as e:
            raise ConfigError(str(e)) from None
    return Config(**sections)


def _flag_index() -> dict[str, list[str]]:
    """Short key -> the sections that have it (``lr`` -> ``["optim"]``)."""
    index: dict[str, list[str]] = {}
    for name, cls in SECTIONS.items():
        for f in dataclasses.fields(cls):
            index.setdefault(f.name, []).append(name)
    return index


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``--section.key value`` / ``--section.key=value`` / ``--key value`` to a raw dict."""
    index = _flag_index()
    out = {k: dict(v) for k, v in data.items()}
    i = 0
    while i < len(overrides):
        arg = overrides[i]
        if not arg.startswith("--"):
            raise ConfigError(
                f"unexpected argument {arg!r}: overrides look like --section.key value"
            )
        name, eq, value = arg[2:].partition("=")
        if not eq:
            if i + 1 >= len(overrides):
                raise ConfigError(f"--{name}: missing value")
            value = overrides[i + 1]
            i += 1
        i += 1
        name = name.replace("-", "_")
        if "." in name:
            section, key = name.split(".", 1)
        else:
            owners = index.get(name, [])
            if len(owners) != 1:
                hint = (
                    f"ambiguous, use one of {', '.join(f'--{s}.{name}' for s in owners)}"
                    if owners
                    else "unknown flag"
                )
                raise ConfigError(f"--{name}: {hint}")
            section, key = owners[0], name
        if section not in SECTIONS:
            raise ConfigError(
                f"--{name}: unknown section {section!r} (known: {', '.join(SECTIONS)})"
            )
        if key not in {f.name for f in dataclasses.fields(SECTIONS[section])}:
            raise ConfigError(f"--{section}.{key}: unknown flag")
        out.setdefault(section, {})[key] = value
    return out


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> Config:
    """Read a TOML file (or start from defaults when path is None) and apply overrides."""
    data: dict[str, Any] = {}
    source = "defaults"
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"--config {path}: no such file")
        try:
            data = tomllib.loads(p.read_text())
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"--config {path}: not valid TOML ({e})") from None
        source = str(p)
    return from_dict(apply_overrides(data, overrides or []), source)
