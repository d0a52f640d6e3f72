"""Pretraining loop: ``python -m trainer.train --config trainer/configs/demo.toml [--key value]``.

Under torchrun (``torchrun --nproc_per_node N -m trainer.train ...``) it trains with DDP: rank 0
logs the scalars, every rank logs its own step phases (data, h2d, forward, backward, the wait in
the all-reduce, optimizer) into its own run of the job, rank 0 also gathers every rank's step
time once per log interval, and one system sampler runs per host. ``--resume auto|PATH``
continues a checkpoint exactly, in the same reslog runs. ``--no-log`` trains without logging.
See docs/trainer.md.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from schema.store.errors import StoreError
from schema.store.status import FAILED, KILLED
from trainer import checkpoint, distributed, kernels, legacy
from trainer.config import Config, ConfigError, load_config
from trainer.loaders import data_vocab_size, make_loader
from trainer.metrics import Logger, NullLogger, StepTimer, device_peak, make_logger
from trainer.model import Transformer
from trainer.schedules import Schedule

# --------------------------------------------------------------------------- the trainer


class Trainer:
    def __init__(self, cfg: Config, resume: str | None = None, logger: Logger | None = None):
        self.cfg = cfg
        t = cfg.train
        want_cuda = t.device == "cuda" or (t.device == "auto" and torch.cuda.is_available())
        if want_cuda and not torch.cuda.is_available():
            raise ConfigError("--train.device='cuda': CUDA is not available here")
        self.dist = distributed.init("cuda" if want_cuda else "cpu")
        self.device = (
            torch.device("cuda", self.dist.local_rank) if want_cuda else torch.device("cpu")
        )
        if want_cuda:
            torch.set_float32_matmul_precision("high")
        if t.threads:
            torch.set_num_threads(t.threads)
        use_bf16 = t.dtype == "bf16" or (t.dtype == "auto" and want_cuda)
        self.autocast = (
            torch.autocast(self.device.type, dtype=torch.bfloat16)
            if use_bf16
            else contextlib.nullcontext()
        )

        torch.manual_seed(t.seed)  # same initial weights on every rank
        cfg.model.vocab_size = data_vocab_size(cfg)
        self.raw_model = Transformer(cfg.model).to(self.device)
        try:  # a kernel asked for that cannot run here stops before step 0, naming the flag
            ks = kernels.select(
                self.device.type,
                cfg.model.attention or None,
                torch.bfloat16 if use_bf16 else torch.float32,
            )
        except (RuntimeError, ValueError) as e:
            a = cfg.model.attention
            flag = (
                f"--model.attention={a!r}" if a else f"${kernels.ENV_ATTN}/${kernels.ENV_KERNELS}"
            )
            raise ConfigError(f"{flag}: {e}") from None
        self.raw_model.set_kernels(ks)
        self.optimizer = self._make_optimizer()
        self.schedule = Schedule.from_config(cfg.schedule, cfg.optim.lr, t.steps)
        try:
            self.loader = make_loader(
                cfg, "train", self.dist.rank, self.dist.world_size, cfg.model.vocab_size
            )
        except (ValueError, FileNotFoundError) as e:  # too little data, no manifest
            raise ConfigError(f"--data.dir={cfg.data.dir!r}: {e}") from None
        self.step, self.tokens, run_uid, stored_job = 0, 0, None, ""
        self.resumed_from: Path | None = None
        self.best_valid = math.inf  # restored by a resume: the summary keeps the run's best
        if resume:
            run_uid, stored_job = self._load(resume)
        # Every rank's run carries the job id; a resumed job keeps its own.
        self.job = distributed.agree_job(stored_job or cfg.logging.group)
        if self.resumed_from is None:  # a resume restored the RNG streams instead
            torch.manual_seed(t.seed + self.dist.rank)

        model: torch.nn.Module = self.raw_model
        if t.compile:
            model = torch.compile(model)  # type: ignore[assignment]
        self.timer = StepTimer(self.device)
        self.comm: distributed.CommTimer | None = None
        if self.dist.is_distributed:
            # The only buffers are the RoPE tables, the same on every rank: broadcasting them
            # would be a collective inside rank 0's forward each step, where it waits for the
            # slowest rank and looks like a slow forward itself (docs/ranks.md).
            model = DDP(
                model,
                device_ids=[self.dist.local_rank] if want_cuda else None,
                broadcast_buffers=False,
            )
            self.comm = distributed.CommTimer(self.timer.stamp)
            self.comm.register(model)
        self.model = model

        self.tokens_per_step = cfg.tokens_per_step * self.dist.world_size
        self.flops_per_token = self.raw_model.flops_per_token(cfg.data.seq_len)
        peak = device_peak(self.device)
        self.peak_name, self.peak_flops = peak if peak else (None, None)
        self._pending_loss: dict[int, torch.Tensor] = {}
        # A log step's scalars wait here for its timings, which CUDA events give a step or more
        # late; logged alone first, the timings would come behind a later step and reslog (as
        # wandb) drops a step lower than one already logged.
        self._unlogged: dict[int, dict[str, Any]] = {}
        self._rank_times: list[float] = []
        self._phase_sums: dict[str, float] = {}  # since the last log step, for the means
        self._phase_steps = 0
        self._phase = self.schedule.phase(max(self.step - 1, 0))
        self._nan_alerted = False
        self._last_print = (time.perf_counter(), self.tokens)
        if logger is None:
            logger = make_logger(cfg, self.dist, run_uid, self.runtime_info(), job=self.job)
        # This rank's own run: its step phases (time/*), its stall events, its runtime facts.
        self.rank_logger = logger
        # The job's scalars and events (loss, lr, validation, checkpoints): rank 0's run only.
        self.logger = logger if self.dist.is_master else NullLogger()
        self._announce()

    # ----------------------------------------------------------------------- set-up helpers

    def _param_groups(self) -> list[tuple[list[str], list[torch.nn.Parameter]]]:
        """(names, parameters) of the two AdamW groups: matrices (decayed), then the rest."""
        named = list(self.raw_model.named_parameters())
        decay = [(n, p) for n, p in named if p.dim() >= 2]
        no_decay = [(n, p) for n, p in named if p.dim() < 2]
        return [([n for n, _ in g], [p for _, p in g]) for g in (decay, no_decay)]

    def _make_optimizer(self) -> torch.optim.Optimizer:
        o = self.cfg.optim
        (_, decay), (_, no_decay) = self._param_groups()
        # torch's fused AdamW runs on CUDA and CPU: on CPU it is one kernel per parameter
        # instead of a dozen (3.4 ms less per demo step, docs/benchmarks.md).
        fused = o.fused == "true" or (o.fused == "auto" and self.device.type in ("cuda", "cpu"))
        groups = [
            {"params": decay, "weight_decay": o.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ]
        return torch.optim.AdamW(
            groups, lr=o.lr, betas=(o.beta1, o.beta2), eps=o.eps, fused=fused or None
        )

    def runtime_info(self) -> dict[str, Any]:
        """Facts of this run that the config does not fix: stored in the run config and summary."""
        return {
            "device": str(self.device),
            "gpu_name": torch.cuda.get_device_name(self.device)
            if self.device.type == "cuda"
            else None,
            "peak_flops": self.peak_flops,
            "peak_flops_source": self.peak_name,
            "world_size": self.dist.world_size,
            "ddp": isinstance(self.model, DDP),
            "local_rank": self.dist.local_rank,
            "job": self.job,
            "n_params": self.raw_model.num_params(),
            "flops_per_token": self.flops_per_token,
            "tokens_per_step": self.tokens_per_step,
            "kernels": self.raw_model.kernels.names() if self.raw_model.kernels else {},
            "torch": torch.__version__,
        }

    def _announce(self) -> None:
        info = self.runtime_info()
        self.rank_logger.summary({f"runtime/{k}": v for k, v in info.items() if k != "kernels"})
        if self.resumed_from is not None:
            # reslog itself records the "resume" event; this says which checkpoint it came from.
            self.logger.event(
                "note", f"resumed from checkpoint at step {self.step}", body=str(self.resumed_from)
            )
        distributed.print0(
            f"model {info['n_params'] / 1e6:.2f}M params | {info['device']} x{info['world_size']}"
            f" | kernels {info['kernels']} | {self.tokens_per_step} tokens/step"
            + (f" | resumed at step {self.step}" if self.resumed_from else "")
        )

    # ----------------------------------------------------------------------- checkpoints

    def _load(self, resume: str) -> tuple[str | None, str]:
        """Restore a checkpoint; returns (this rank's run uid, the job id) stored with it."""
        path = checkpoint.resolve(resume, self.cfg.train.ckpt_dir)
        if path is None:
            distributed.print0(
                f"--resume {resume}: no checkpoint in {self.cfg.train.ckpt_dir}, starting fresh"
            )
            return None, ""
        main, rank_state = checkpoint.load(path, self.dist.rank, map_location=self.device)
        if main["config"]["model"] != self.cfg.to_dict()["model"]:
            raise ConfigError(f"--resume {path}: the checkpoint's [model] differs from this config")
        optimizer_state = main["optimizer"]
        if legacy.is_unfused(main["model"]):  # written before wqkv/w13: map onto them
            optimizer_state = legacy.fuse_optimizer_state(
                optimizer_state,
                [names for names, _ in self._param_groups()],
                {k: v.size(0) for k, v in main["model"].items() if v.dim() > 0},
            )
        self.raw_model.load_state_dict(main["model"])
        self.optimizer.load_state_dict(optimizer_state)
        self.step, self.tokens = int(main["step"]), int(main["tokens"])
        self.best_valid = float(main.get("best_valid", math.inf))
        if rank_state is None:
            raise FileNotFoundError(
                f"--resume {path}: no rank{self.dist.rank}.pt (saved with world size "
                f"{main.get('world_size')}, now {self.dist.world_size})"
            )
        self.loader.load_state_dict(rank_state["loader"])
        checkpoint.set_rng_state(rank_state["rng"])
        self.resumed_from = path
        uid = main.get("run_uid") if self.dist.is_master else rank_state.get("run_uid")
        return uid, str(main.get("job") or "")

    def save_checkpoint(self) -> Path:
        main = None
        if self.dist.is_master:
            main = {
                "model": self.raw_model.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "schedule": self.schedule.state_dict(),
                "step": self.step,
                "tokens": self.tokens,
                "best_valid": self.best_valid,
                "run_uid": self.logger.uid,
                "job": self.job,
                "config": self.cfg.to_dict(),
            }
        rank_state = {
            "loader": self.loader.state_dict(),
            "rng": checkpoint.rng_state(),
            "run_uid": self.rank_logger.uid,  # this rank's own run, continued by a resume
        }
        t = self.cfg.train
        path = checkpoint.save(
            t.ckpt_dir,
            self.step,
            main=main,
            rank_state=rank_state,
            rank=self.dist.rank,
            world_size=self.dist.world_size,
            keep_last=t.keep_last,
        )
        self.logger.event("checkpoint", f"step {self.step}", body=str(path))
        return path

    # ----------------------------------------------------------------------- one step

    def train_step(self) -> tuple[torch.Tensor, torch.Tensor, float]:
        """One optimizer step over grad_accum micro-batches; returns (mean loss, grad norm before
        clipping, lr), the first two as tensors still on the device (no synchronisation)."""
        accum = self.cfg.data.grad_accum
        lr = self.schedule(self.step)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.timer.start(self.step + 1)
        loss_sum = torch.zeros((), device=self.device)
        for micro in range(accum):
            x, y = next(self.loader)
            self.timer.mark("data")
            x = x.to(self.device, non_blocking=True)
            y = y.to(self.device, non_blocking=True)
            self.timer.mark("h2d")
            last = micro == accum - 1
            sync = (
                self.model.no_sync()
                if isinstance(self.model, DDP) and not last
                else contextlib.nullcontext()
            )
            with sync:
                with self.autocast:
                    loss = self.model(x, y)
                self.timer.mark("forward")
                (loss / accum).backward()
            ready = self.comm.take() if self.comm is not None and last else None
            if ready is not None:  # own backward until the last bucket, then the all-reduce wait
                self.timer.mark_at("backward", ready)
                self.timer.mark("comm")
            else:
                self.timer.mark("backward")
            loss_sum += loss.detach()
        clip = self.cfg.optim.grad_clip or math.inf
        grad_norm = torch.nn.utils.clip_grad_norm_(self.raw_model.parameters(), clip)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        loss = loss_sum / accum
        # A copy of the loss that can be read once this step's events are done, without a sync.
        self._pending_loss[self.step + 1] = (
            loss.to("cpu", non_blocking=True) if self.device.type == "cuda" else loss
        )
        self.timer.mark("optimizer")
        self.timer.end()
        self.step += 1
        self.tokens += self.tokens_per_step
        return loss, grad_norm, lr

    # ----------------------------------------------------------------------- logging

    def _is_log_step(self, step: int) -> bool:
        return step % self.cfg.logging.log_every == 0 or step == self.cfg.train.steps

    def _on_resolved(self, step: int, times: dict[str, float]) -> None:
        """A finished step's timings are known: log the breakdown, throughput and MFU."""
        if self.dist.is_distributed:  # gathered and cleared per log step; only under DDP
            self._rank_times.append(times["step"])
        loss_host = self._pending_loss.pop(step, None)
        if loss_host is not None:
            value = float(loss_host)
            if not math.isfinite(value) and not self._nan_alerted:
                self._nan_alerted = True
                self.logger.event("alert", f"train/loss is {value} at step {step}", level="error")
            pe = self.cfg.logging.print_every
            if pe and (step % pe == 0 or step == self.cfg.train.steps):
                self._print(step, value)
        for phase, seconds in times.items():
            self._phase_sums[phase] = self._phase_sums.get(phase, 0.0) + seconds
        self._phase_steps += 1
        if not self._is_log_step(step):
            return
        # Each phase's mean over the steps since the last log step, on every rank that logs.
        n, sums = self._phase_steps, self._phase_sums
        self._phase_sums, self._phase_steps = {}, 0
        metrics: dict[str, Any] = {f"time/{k}": v / n for k, v in sums.items()}
        if not self.dist.is_master:
            if self.cfg.logging.every_rank:
                self.rank_logger.log(metrics, step=step)
            self._emit(step, {})
            return
        if metrics["time/step"] > 0:
            tps = self.tokens_per_step / metrics["time/step"]
            metrics["train/tokens_per_s"] = tps
            if self.peak_flops:
                per_gpu = tps / self.dist.world_size
                metrics["train/mfu"] = self.flops_per_token * per_gpu / self.peak_flops
        self._emit(step, metrics)

    def _emit(self, step: int, metrics: dict[str, Any]) -> None:
        """Log step ``step``'s waiting scalars with ``metrics``, in one call; any earlier step
        still waiting goes first, so the steps reach the logger in order."""
        for s in sorted(s for s in self._unlogged if s < step):
            self.logger.log(self._unlogged.pop(s), step=s)
        merged = {**self._unlogged.pop(step, {}), **metrics}
        if merged:
            self.logger.log(merged, step=step)

    def _settle(self) -> None:
        """Wait for every step's timings and log all that waits (before a log at the current
        step from elsewhere: validation, the end of training, closing)."""
        for s, times in self.timer.drain():
            self._on_resolved(s, times)
        for s in sorted(self._unlogged):
            self.logger.log(self._unlogged.pop(s), step=s)

    def _print(self, step: int, loss: float) -> None:
        now = time.perf_counter()
        t0, tok0 = self._last_print
        self._last_print = (now, self.tokens)
        tps = (self.tokens - tok0) / max(now - t0, 1e-9)
        distributed.print0(
            f"step {step:>6}/{self.cfg.train.steps} | loss {loss:.4f} | "
            f"lr {self.schedule(step - 1):.2e} | {tps:,.0f} tok/s"
        )

    def _gather_rank_times(self, step: int) -> None:
        """All ranks: mean step time since the last gather -> rank 0 logs time/rank{r}/step."""
        mine = sum(self._rank_times) / len(self._rank_times) if self._rank_times else math.nan
        self._rank_times.clear()
        out = torch.empty(self.dist.world_size, dtype=torch.float64)
        dist.all_gather_into_tensor(
            out, torch.tensor([mine], dtype=torch.float64), group=distributed.cpu_group()
        )
        if self.dist.is_master:
            ranks = {f"time/rank{r}/step": float(v) for r, v in enumerate(out.tolist())}
            if step in self._unlogged:  # the step waits for its timings: it goes with them
                self._unlogged[step].update(ranks)
            else:
                self.logger.log(ranks, step=step)

    def log_step(self, loss: torch.Tensor, grad_norm: torch.Tensor, lr: float) -> None:
        step = self.step  # steps done, the 1-based number of the step just taken
        if self._is_log_step(step):
            # 0-d device tensors: reslog converts them in bulk when it flushes, so no sync here.
            # Logged with the step's timings once they resolve (_emit).
            self._unlogged[step] = {
                "train/loss": loss,
                "train/grad_norm": grad_norm,
                "train/lr": lr,
                "train/tokens": self.tokens,
            }
        for s, times in self.timer.poll():
            self._on_resolved(s, times)
        phase = self.schedule.phase(step - 1)
        if phase != self._phase:
            self.logger.event(
                "schedule", f"{self._phase} -> {phase} at step {step}", body=f"lr {lr:.3e}"
            )
            self._phase = phase
        if self.dist.is_distributed and self._is_log_step(step):
            self._gather_rank_times(step)

    # ----------------------------------------------------------------------- validation

    @torch.no_grad()
    def evaluate(self) -> float | None:
        """Mean loss over eval_batches of the valid split (all ranks), logged as valid/loss and
        valid/ppl. None when the valid split is too small for one batch."""
        try:
            loader = make_loader(
                self.cfg,
                "valid",
                self.dist.rank,
                self.dist.world_size,
                self.cfg.model.vocab_size,
                evaluation=True,
            )
        except ValueError as e:
            distributed.print0(f"validation skipped: {e}")
            return None
        self.raw_model.eval()
        total = torch.zeros(2, dtype=torch.float64, device=self.device)
        try:
            for _, (x, y) in zip(range(self.cfg.train.eval_batches), loader, strict=False):
                with self.autocast:
                    loss = self.raw_model(x.to(self.device), y.to(self.device))
                total += torch.stack([loss.double(), torch.ones((), device=self.device).double()])
        finally:
            loader.close()
            self.raw_model.train()
        if self.dist.is_distributed:
            dist.all_reduce(total)
        loss_sum, n = total.tolist()  # a sync, once per validation
        if n == 0:
            return None
        valid = loss_sum / n
        self.best_valid = min(self.best_valid, valid)
        self._settle()  # the steps before this one first: validation has synchronised anyway
        self.logger.log(
            {"valid/loss": valid, "valid/ppl": math.exp(min(valid, 50.0))}, step=self.step
        )
        self.logger.summary({"best_valid_loss": self.best_valid})
        distributed.print0(
            f"step {self.step:>6} | valid loss {valid:.4f} | ppl {math.exp(min(valid, 50.0)):.2f}"
        )
        return valid

    # ----------------------------------------------------------------------- the loop

    def _out_of_time(self, deadline: float) -> bool:
        """Whether the wall-time budget is spent; under DDP every rank gets the same answer."""
        late = time.monotonic() >= deadline
        if not self.dist.is_distributed:
            return late
        flag = torch.tensor([1 if late else 0], dtype=torch.int32)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=distributed.cpu_group())
        return bool(flag.item())

    def train(self) -> None:
        t = self.cfg.train
        deadline = time.monotonic() + 60 * t.max_minutes if t.max_minutes > 0 else None
        while self.step < t.steps:
            loss, grad_norm, lr = self.train_step()
            self.log_step(loss, grad_norm, lr)
            if t.eval_every and self.step % t.eval_every == 0:
                self.evaluate()
            if t.ckpt_every and self.step % t.ckpt_every == 0:
                self.save_checkpoint()
            if deadline is not None and self._out_of_time(deadline):
                self.logger.event(
                    "note", f"time budget of {t.max_minutes:g} min reached at step {self.step}"
                )
                distributed.print0(f"time budget of {t.max_minutes:g} min reached: stopping")
                break
        self._settle()
        if t.eval_every and self.step % t.eval_every != 0:
            self.evaluate()
        if t.save_final and not (t.ckpt_every and self.step % t.ckpt_every == 0):
            self.save_checkpoint()

    def close(self, status: str | None = None) -> None:
        """Release the loader, end the run (``status`` None = finished), leave the group."""
        with contextlib.suppress(Exception):
            self.loader.close()
        # What waits for timings is logged even after a crash (a failed CUDA context may not
        # answer the events: then it is lost with the step, as it would be unsynchronised).
        with contextlib.suppress(Exception):
            self._settle()
        try:
            self.rank_logger.close(status)
        finally:
            distributed.destroy()


# --------------------------------------------------------------------------- command line


def parse_args(argv: list[str] | None = None) -> tuple[Config, argparse.Namespace]:
    p = argparse.ArgumentParser(
        prog="python -m trainer.train",
        description="Pretrain a LLaMA-style model, logging through reslog.",
        epilog="Any other --section.key VALUE (or --key VALUE when unambiguous) overrides the "
        "config file, e.g. --optim.lr 1e-3 --train.steps 200.",
    )
    p.add_argument("--config", help="TOML file (trainer/configs/*.toml); defaults otherwise")
    p.add_argument("--resume", help="'auto' (newest in train.ckpt_dir) or a checkpoint path")
    p.add_argument("--no-log", action="store_true", help="train without logging (no-op logger)")
    args, rest = p.parse_known_args(argv)
    if args.no_log:
        rest += ["--logging.enabled", "false"]
    try:
        cfg = load_config(args.config, rest)
    except ConfigError as e:
        p.error(str(e))
    return cfg, args


def main(argv: list[str] | None = None) -> int:
    cfg, args = parse_args(argv)
    try:
        trainer = Trainer(cfg, resume=args.resume)
    except (ConfigError, StoreError) as e:  # before step 0: say why in one line, train nothing
        distributed.destroy()
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        trainer.train()
    except KeyboardInterrupt:
        trainer.close(KILLED)
        return 130
    except BaseException:
        trainer.close(FAILED)
        raise
    else:
        trainer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
