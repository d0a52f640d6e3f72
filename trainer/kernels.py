"""Optional fast kernels behind one module, each chosen once per device type with a fallback.

    attention      flash-attn -> xformers -> F.scaled_dot_product_attention -> naive
    swiglu         xformers -> eager
    rms_norm       F.rms_norm (fused) -> eager
    cross_entropy  liger-kernel -> F.cross_entropy

A fast path is "available" only if CUDA is present and one tiny call on the GPU succeeds:
xformers imports fine on CPU but its ops raise, so import success proves nothing. The answer is
cached for the process. Overrides: the environment variable ``TRAINER_ATTN`` (flash, xformers,
sdpa, naive) or the ``attention=`` argument of :func:`select` (tests). An override that cannot
run raises instead of silently falling back, so a benchmark never measures the wrong kernel.

Tensor layout everywhere here: q is (B, T, H, D), k and v are (B, T, Hkv, D) with H % Hkv == 0
(grouped-query attention); the output is (B, T, H, D).
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

ATTENTION_BACKENDS = ("flash", "xformers", "sdpa", "naive")
ENV_ATTN = "TRAINER_ATTN"

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
    from flash_attn import flash_attn_func

    if q.dtype not in (torch.float16, torch.bfloat16):  # flash-attn has no fp32 kernel
        return attention_sdpa(q, k, v)
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
    return F.cross_entropy(logits.float(), targets, ignore_index=ignore_index)


def cross_entropy_liger(logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = -100):
    from liger_kernel.transformers.functional import liger_cross_entropy

    return liger_cross_entropy(logits, targets, ignore_index=ignore_index)


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
        elif name == "cross_entropy_liger":
            logits = torch.randn(4, 64, device=dev, dtype=torch.float32)
            cross_entropy_liger(logits, torch.zeros(4, dtype=torch.long, device=dev))
        else:
            raise ValueError(f"unknown kernel {name!r}")
        torch.cuda.synchronize()  # once per process: surface asynchronous launch errors here
    except Exception as e:  # ImportError, NotImplementedError, CUDA arch errors, ...
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}".strip()
    return None


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


@dataclass(frozen=True)
class KernelSet:
    """The kernels one model uses on one device type; names go into the run config."""

    device_type: str
    attention_name: str
    attention: Callable
    swiglu_name: str
    swiglu: Callable
    rms_norm_name: str
    rms_norm: Callable
    cross_entropy_name: str
    cross_entropy: Callable

    def names(self) -> dict[str, str]:
        return {
            "attention": self.attention_name,
            "swiglu": self.swiglu_name,
            "rms_norm": self.rms_norm_name,
            "cross_entropy": self.cross_entropy_name,
        }


def select(device_type: str, attention: str | None = None) -> KernelSet:
    """The kernel set for a device type ("cpu", "cuda"). ``attention`` (or $TRAINER_ATTN) forces
    one attention backend; forcing one that cannot run raises RuntimeError with the reason."""
    forced = attention or os.environ.get(ENV_ATTN) or None
    return _select(device_type, forced)


@functools.cache
def _select(device_type: str, forced: str | None) -> KernelSet:
    on_cuda = device_type == "cuda"
    if forced is not None:
        if forced not in ATTENTION_BACKENDS:
            raise ValueError(
                f"attention backend {forced!r} (from ${ENV_ATTN} or --model.attention) is not one "
                f"of {', '.join(ATTENTION_BACKENDS)}"
            )
        ok, why = available(forced)
        if forced in ("flash", "xformers") and not on_cuda:
            ok, why = False, f"the model is on {device_type}, {forced} runs on CUDA only"
        if not ok:
            raise RuntimeError(f"attention backend {forced!r} was requested but cannot run: {why}")
        attn_name = forced
    else:
        candidates = ("flash", "xformers", "sdpa") if on_cuda else ("sdpa",)
        attn_name = next(n for n in candidates if available(n)[0])

    swiglu_name = "xformers" if on_cuda and available("swiglu_xformers")[0] else "eager"
    rms_name = "fused" if available("rms_norm_fused")[0] else "eager"
    ce_name = "liger" if on_cuda and available("cross_entropy_liger")[0] else "eager"
    return KernelSet(
        device_type=device_type,
        attention_name=attn_name,
        attention=_ATTENTION[attn_name],
        swiglu_name=swiglu_name,
        swiglu=swiglu_xformers if swiglu_name == "xformers" else swiglu_eager,
        rms_norm_name=rms_name,
        rms_norm=rms_norm_fused if rms_name == "fused" else rms_norm_eager,
        cross_entropy_name=ce_name,
        cross_entropy=cross_entropy_liger if ce_name == "liger" else cross_entropy_eager,
    )


def clear_cache() -> None:
    """Forget probes and selections (tests that change $TRAINER_ATTN)."""
    _probe.cache_clear()
    _select.cache_clear()
