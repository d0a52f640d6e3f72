"""Optional fast kernels behind one module, chosen once per device type and compute dtype.

    attention      flash-attn -> xformers -> F.scaled_dot_product_attention -> naive
    swiglu         xformers (its fused op only) -> eager
    rms_norm       F.rms_norm (fused) -> eager
    cross_entropy  F.cross_entropy; liger-kernel when forced (both in float32, whatever the
                   logits' dtype)

A fast path is "available" only if CUDA is present and one tiny call on the GPU succeeds:
xformers imports fine on CPU but its ops raise, so import success proves nothing. The answer is
cached for the process. `auto` takes the first kernel of each kind that runs and says once what it
chose and what it passed over, with the reason. Overrides: ``TRAINER_ATTN`` (flash, xformers,
sdpa, naive) or ``--model.attention``, and ``TRAINER_KERNELS="kind=name,..."`` for any kind. A
forced kernel that cannot run here (flash in fp32, xformers without CUDA) raises instead of
silently falling back, so a benchmark never measures the wrong kernel.

Tensor layout everywhere here: q is (B, T, H, D), k and v are (B, T, Hkv, D) with H % Hkv == 0
(grouped-query attention); the output is (B, T, H, D).
"""

from __future__ import annotations

import functools
import logging
import math
import os
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

ATTENTION_BACKENDS = ("flash", "xformers", "sdpa", "naive")
ENV_ATTN = "TRAINER_ATTN"
ENV_KERNELS = "TRAINER_KERNELS"

log = logging.getLogger("trainer.kernels")

# --------------------------------------------------------------------------- reference (eager) ops


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """torch.repeat_interleave(x, dim=2, repeats=n_rep), without a copy until it is needed."""
    if n_rep == 1:
        return x
    B, T, Hkv, D = x.shape
    return x[:, :, :, None, :].expand(B, T, Hkv, n_rep, D).reshape(B, T, Hkv * n_rep, D)


def attention_naive(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal softmax(q k^T / sqrt(D)) v written out: the reference for every kernel."""
    n_rep = q.size(2) // k.size(2)
    k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, H, T, D)
    T = q.size(2)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.size(-1)))  # (B, H, T, T)
    mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    att = att.masked_fill(~mask, float("-inf"))
    att = torch.softmax(att.float(), dim=-1).to(q.dtype)
    return (att @ v).transpose(1, 2)  # (B, T, H, D)


def attention_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, H, T, D)
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=q.size(1) != k.size(1))
    return y.transpose(1, 2)  # (B, T, H, D)


def attention_flash(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    if q.dtype not in (torch.float16, torch.bfloat16):
        # flash-attn has no fp32 kernel; select() never picks it for fp32, so this is a misuse.
        raise RuntimeError(f"flash attention needs bf16 or fp16 inputs, got {q.dtype}")
    from flash_attn import flash_attn_func

    return flash_attn_func(q, k, v, causal=True)  # native GQA, same (B, T, H, D) layout


def attention_xformers(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    import xformers.ops as xops

    B, T, H, D = q.shape
    Hkv = k.size(2)
    if Hkv != H:  # grouped layout (B, T, G, H/G, D); expand is a view, no copy
        q = q.view(B, T, Hkv, H // Hkv, D)
        k = k[:, :, :, None, :].expand(B, T, Hkv, H // Hkv, D)
        v = v[:, :, :, None, :].expand(B, T, Hkv, H // Hkv, D)
    y = xops.memory_efficient_attention(q, k, v, attn_bias=xops.LowerTriangularMask())
    return y.reshape(B, T, H, D)


def swiglu_eager(x: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    """w2(silu(w1 x) * w3 x), LLaMA's feed-forward with bias-free weights (out, in); w13 is
    [w1; w3] stacked by rows, so the gate and up projections are one matmul."""
    gate, up = F.linear(x, w13).chunk(2, dim=-1)
    return F.linear(F.silu(gate) * up, w2)


def swiglu_xformers(x: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    import xformers.ops as xops

    w1, w3 = w13.chunk(2, dim=0)  # row blocks of a contiguous matrix: contiguous views
    # xformers names the gate w1, the up projection w2 and the output w3.
    return xops.swiglu(x, w1, None, w3, None, w2, None)


def rms_norm_eager(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """x / sqrt(mean(x^2) + eps) * weight, computed in float32 for stability."""
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return y.to(x.dtype) * weight


def rms_norm_fused(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return F.rms_norm(x, (x.size(-1),), weight, eps)


def cross_entropy_eager(logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = -100):
    """Mean cross-entropy in float32 whatever the logits' dtype: in bf16 the log-sum-exp over a
    large vocabulary and the loss itself would carry 3 significant digits."""
    return F.cross_entropy(logits.float(), targets, ignore_index=ignore_index)


def cross_entropy_liger(logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = -100):
    """liger's fused forward + backward. It softmaxes in float32 but stores each row's loss in
    the input's dtype, so bf16 logits would give a loss rounded to bf16: it gets float32."""
    from liger_kernel.transformers.functional import liger_cross_entropy

    return liger_cross_entropy(logits.float(), targets, ignore_index=ignore_index)


# --------------------------------------------------------------------------- availability probes


@functools.cache
def _probe(name: str) -> str | None:
    """None if the kernel runs here, else the reason it cannot. One tiny CUDA call, cached."""
    if name in ("sdpa", "naive", "eager"):
        return None
    if name == "rms_norm_fused":
        return None if hasattr(F, "rms_norm") else "torch has no F.rms_norm (needs torch >= 2.4)"
    if not torch.cuda.is_available():
        return "needs CUDA (torch.cuda.is_available() is False)"
    dev, dt = "cuda", torch.bfloat16
    try:
        if name == "flash":
            q = torch.randn(1, 8, 2, 64, device=dev, dtype=dt)
            attention_flash(q, q[:, :, :1], q[:, :, :1])
        elif name == "xformers":
            q = torch.randn(1, 8, 2, 64, device=dev, dtype=dt)
            attention_xformers(q, q[:, :, :1], q[:, :, :1])
        elif name == "swiglu_xformers":
            x, w = (
                torch.randn(4, 64, device=dev, dtype=dt),
                torch.randn(128, 64, device=dev, dtype=dt),
            )
            swiglu_xformers(x, torch.cat((w, w)), w.t().contiguous())
            unfused = xformers_swiglu_unfused(x, w, w.t().contiguous())
            if unfused:
                return unfused
        elif name == "cross_entropy_liger":
            logits = torch.randn(4, 64, device=dev, dtype=torch.float32)
            cross_entropy_liger(logits, torch.zeros(4, dtype=torch.long, device=dev))
        else:
            raise ValueError(f"unknown kernel {name!r}")
        torch.cuda.synchronize()  # once per process: surface asynchronous launch errors here
    except Exception as e:  # ImportError, NotImplementedError, CUDA arch errors, ...
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}".strip()
    return None


def xformers_swiglu_unfused(x: torch.Tensor, w13_half: torch.Tensor, w2: torch.Tensor) -> str:
    """Why xformers' swiglu is no faster than ours for these operands ("" when it has a fused op
    for them). Its dispatcher falls back to an eager op of its own, the same math with the gate
    and up projections as two matmuls where swiglu_eager does one; xformers 0.0.35 has no fused
    op at all (seen on an H200 with torch 2.11, where the probe alone had passed)."""
    import xformers.ops as xops

    dispatch = getattr(xops, "SwiGLUOpDispatch", None)
    eager = getattr(xops, "SwiGLUEagerOp", None)
    if dispatch is None or eager is None:
        return ""
    op = dispatch.from_arguments(x, w13_half, None, w13_half, None, w2, None).op
    if op is eager:
        return "xformers' swiglu has no fused op here: it runs its own eager op (two matmuls)"
    return ""


def available(name: str) -> tuple[bool, str]:
    """(runs here?, reason if not) for a kernel name: flash, xformers, sdpa, naive,
    swiglu_xformers, rms_norm_fused, cross_entropy_liger."""
    reason = _probe(name)
    return reason is None, reason or ""


# --------------------------------------------------------------------------- selection

_ATTENTION: dict[str, Callable] = {
    "flash": attention_flash,
    "xformers": attention_xformers,
    "sdpa": attention_sdpa,
    "naive": attention_naive,
}
_SWIGLU: dict[str, Callable] = {"xformers": swiglu_xformers, "eager": swiglu_eager}
_RMS_NORM: dict[str, Callable] = {"fused": rms_norm_fused, "eager": rms_norm_eager}
_CROSS_ENTROPY: dict[str, Callable] = {"liger": cross_entropy_liger, "eager": cross_entropy_eager}
# Kernels `auto` never picks, with the reason; they run when forced.
NOT_AUTO: dict[tuple[str, str], str] = {
    # Seen on an H200: liger's forward reads target_mask.sum().item(), a host sync every
    # micro-batch (the no-sync check failed on it) and a graph break under torch.compile.
    ("cross_entropy", "liger"): "it syncs the host every call (target_mask.sum().item())",
}

# kind -> {name: implementation}; each kind's names in the order `auto` tries them.
KINDS: dict[str, dict[str, Callable]] = {
    "attention": _ATTENTION,
    "swiglu": _SWIGLU,
    "rms_norm": _RMS_NORM,
    "cross_entropy": _CROSS_ENTROPY,
}
# (kind, name) -> the probe that says whether it runs here.
_PROBE_NAME = {
    ("attention", "flash"): "flash",
    ("attention", "xformers"): "xformers",
    ("swiglu", "xformers"): "swiglu_xformers",
    ("rms_norm", "fused"): "rms_norm_fused",
    ("cross_entropy", "liger"): "cross_entropy_liger",
}
CUDA_ONLY = frozenset(
    {
        ("attention", "flash"),
        ("attention", "xformers"),
        ("swiglu", "xformers"),
        ("cross_entropy", "liger"),
    }
)
HALF_ONLY = frozenset({("attention", "flash")})  # no fp32 kernel
HALF = (torch.float16, torch.bfloat16)


def _auto(kind: str, device_type: str) -> tuple[str, ...]:
    """What `auto` tries for `kind`, in KINDS' order: every kernel but the naive reference and
    those in NOT_AUTO, the CUDA-only ones on CUDA only (the last is the reference and always
    runs)."""
    return tuple(
        name
        for name in KINDS[kind]
        if name != "naive"
        and (kind, name) not in NOT_AUTO
        and (device_type == "cuda" or (kind, name) not in CUDA_ONLY)
    )


def cannot_run(kind: str, name: str, device_type: str, dtype: torch.dtype) -> str | None:
    """None when kernel ``name`` of ``kind`` runs for this device type and compute dtype, else
    the reason it cannot (a sentence a user can act on)."""
    if name not in KINDS[kind]:
        return f"unknown {kind} kernel {name!r} (one of {', '.join(KINDS[kind])})"
    if (kind, name) in CUDA_ONLY and device_type != "cuda":
        return f"the model is on {device_type}, {name} {kind} runs on CUDA only"
    if (kind, name) in HALF_ONLY and dtype not in HALF:
        return (
            f"{name} {kind} has no {str(dtype).removeprefix('torch.')} kernel (bf16/fp16 only): "
            "train with --train.dtype bf16 or choose another backend"
        )
    probe = _PROBE_NAME.get((kind, name))
    return _probe(probe) if probe else None


def parse_overrides(text: str) -> dict[str, str]:
    """``"attention=sdpa,cross_entropy=eager"`` ($TRAINER_KERNELS) -> {kind: name}; ValueError
    naming the variable for anything else."""
    out: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        kind, eq, name = (s.strip() for s in item.partition("="))
        if not eq or kind not in KINDS or name not in KINDS[kind]:
            choices = "; ".join(f"{k}={'|'.join(v)}" for k, v in KINDS.items())
            raise ValueError(f"${ENV_KERNELS}: {item!r} is not kind=name ({choices})")
        out[kind] = name
    return out


@dataclass(frozen=True)
class KernelSet:
    """The kernels one model uses on one device type and compute dtype; names go into the run
    config. ``skipped`` holds, per kind, the faster kernels `auto` passed over and why."""

    device_type: str
    dtype: torch.dtype
    attention_name: str
    attention: Callable
    swiglu_name: str
    swiglu: Callable
    rms_norm_name: str
    rms_norm: Callable
    cross_entropy_name: str
    cross_entropy: Callable
    skipped: tuple[tuple[str, str, str], ...] = ()  # (kind, name, reason)

    def names(self) -> dict[str, str]:
        return {
            "attention": self.attention_name,
            "swiglu": self.swiglu_name,
            "rms_norm": self.rms_norm_name,
            "cross_entropy": self.cross_entropy_name,
        }

    def describe(self) -> str:
        """One line: each kind's kernel, with the faster ones passed over and why."""
        why: dict[str, list[str]] = {}
        for kind, name, reason in self.skipped:
            why.setdefault(kind, []).append(f"not {name}: {reason}")
        return "; ".join(
            f"{kind} {name}" + (f" ({'; '.join(why[kind])})" if kind in why else "")
            for kind, name in self.names().items()
        )


def select(
    device_type: str,
    attention: str | None = None,
    dtype: torch.dtype | None = None,
    overrides: dict[str, str] | None = None,
) -> KernelSet:
    """The kernel set for a device type ("cpu", "cuda") and the dtype the model computes in
    (bf16 under autocast; None means float32).

    ``attention`` (or $TRAINER_ATTN) forces one attention backend; ``overrides`` (or
    $TRAINER_KERNELS, ``kind=name,...``) force any kind. A forced kernel that cannot run raises
    RuntimeError with the reason: never a silent fallback, so a benchmark never measures the
    wrong kernel. What `auto` chose, and what it passed over and why, is said once per process
    (logger ``trainer.kernels``; a warning when a faster CUDA kernel could not be used).
    """
    forced = dict(parse_overrides(os.environ.get(ENV_KERNELS, "")))
    forced.update(overrides or {})
    attn = attention or os.environ.get(ENV_ATTN) or None
    if attn is not None:
        if attn not in ATTENTION_BACKENDS:
            raise ValueError(
                f"attention backend {attn!r} (from ${ENV_ATTN} or --model.attention) is not one "
                f"of {', '.join(ATTENTION_BACKENDS)}"
            )
        forced["attention"] = attn
    return _select(device_type, dtype or torch.float32, tuple(sorted(forced.items())))


@functools.cache
def _select(device_type: str, dtype: torch.dtype, forced: tuple[tuple[str, str], ...]) -> KernelSet:
    wanted = dict(forced)
    chosen: dict[str, str] = {}
    skipped: list[tuple[str, str, str]] = []
    for kind in KINDS:
        if kind in wanted:
            why = cannot_run(kind, wanted[kind], device_type, dtype)
            if why:
                raise RuntimeError(
                    f"{kind} kernel {wanted[kind]!r} was requested but cannot run: {why}"
                )
            chosen[kind] = wanted[kind]
            continue
        for name in _auto(kind, device_type):
            why = cannot_run(kind, name, device_type, dtype)
            if why is None:
                chosen[kind] = name
                break
            skipped.append((kind, name, why))
        else:  # pragma: no cover - the last candidate of each kind is the reference
            raise RuntimeError(f"no {kind} kernel runs on {device_type}")
    ks = KernelSet(
        device_type=device_type,
        dtype=dtype,
        attention_name=chosen["attention"],
        attention=_ATTENTION[chosen["attention"]],
        swiglu_name=chosen["swiglu"],
        swiglu=_SWIGLU[chosen["swiglu"]],
        rms_norm_name=chosen["rms_norm"],
        rms_norm=_RMS_NORM[chosen["rms_norm"]],
        cross_entropy_name=chosen["cross_entropy"],
        cross_entropy=_CROSS_ENTROPY[chosen["cross_entropy"]],
        skipped=tuple(skipped),
    )
    level = logging.WARNING if skipped and device_type == "cuda" else logging.INFO
    log.log(
        level,
        "kernels for %s/%s: %s",
        device_type,
        str(dtype).removeprefix("torch."),
        ks.describe(),
    )
    return ks


def clear_cache() -> None:
    """Forget probes and selections (tests that change $TRAINER_ATTN)."""
    _probe.cache_clear()
    _select.cache_clear()
