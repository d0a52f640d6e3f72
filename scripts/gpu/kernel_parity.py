"""GPU check 4, kernels: every fused path agrees with the naive reference in bf16.

Each case runs a kernel on bf16 inputs, forward and backward, and compares its outputs and
gradients with the textbook form computed in float64 on the same (bf16-valued) inputs. The
bar is the naive reference's own error in bf16: a kernel passes when its error is at most
twice that, plus a small floor (the flash-attn test suite's rule). Losses have a stricter bar:
they must be float32 and within 1e-5 of float64, whatever the logits' dtype. Kernels that are
not installed are listed with the reason (flash-attn has no wheel on PyPI: see docs/gpu.md).

    python scripts/gpu/kernel_parity.py --out OUTDIR [--only NAME,...]

tests/trainer/test_cuda.py runs the same cases under the ``cuda`` marker.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpucheck

DEVICE = "cuda"  # "cpu" for --cpu-dry-run: the cases that run on a CPU test the harness
FLOOR = 1e-3  # relative error any bf16 kernel may have, whatever the reference's
LOSS_BAR = 1e-5  # a float32 loss: relative error against float64


@dataclass
class Row:
    case: str
    output: str
    err: float  # max |kernel - float64| / max |float64|
    base: float | None  # the same for the naive form run in bf16 (None: no bf16 form)
    bar: float

    @property
    def ok(self) -> bool:
        return self.err <= self.bar


def rel_err(a, b) -> float:
    a, b = a.double(), b.double()
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-12)).item()


def _with_grads(fn: Callable, inputs, dout):
    """fn(*inputs) and the gradients of <out, dout> with respect to each input."""
    leaves = [t.detach().clone().requires_grad_(t.is_floating_point()) for t in inputs]
    out = fn(*leaves)
    out.backward(dout.to(out.dtype))
    return [out.detach(), *[t.grad for t in leaves if t.requires_grad]]


def compare(case: str, fn, ref_fn, inputs, dout, names: list[str]) -> list[Row]:
    """fn in bf16 against ref_fn in float64, with ref_fn in bf16 as the bar."""
    got = _with_grads(fn, inputs, dout)
    base = _with_grads(ref_fn, inputs, dout)
    ref = _with_grads(ref_fn, [t.double() if t.is_floating_point() else t for t in inputs], dout)
    rows = []
    for name, g, b, r in zip(names, got, base, ref, strict=True):
        b_err = rel_err(b, r)
        rows.append(Row(case, name, rel_err(g, r), b_err, 2 * b_err + FLOOR))
    return rows


# --------------------------------------------------------------------------- attention


def _qkv(gqa: bool):
    import torch

    torch.manual_seed(0)
    B, T, H, Hkv, D = 2, 256, 8, (2 if gqa else 8), 64
    dev, dt = DEVICE, torch.bfloat16
    q = torch.randn(B, T, H, D, device=dev, dtype=dt)
    k = torch.randn(B, T, Hkv, D, device=dev, dtype=dt)
    v = torch.randn(B, T, Hkv, D, device=dev, dtype=dt)
    return [q, k, v], torch.randn(B, T, H, D, device=dev, dtype=dt)


def attention_rows(case: str, fn: Callable, context=contextlib.nullcontext) -> list[Row]:
    """Grouped-query first; a backend that refuses it is checked with the heads expanded."""
    from trainer.kernels import attention_naive

    names = ["out", "dq", "dk", "dv"]
    try:
        with context():
            return compare(case, fn, attention_naive, *_qkv(gqa=True), names)
    except RuntimeError as e:
        if "No available kernel" not in str(e) and "gqa" not in str(e).lower():
            raise
    with context():
        return compare(
            case + " (GQA refused: heads expanded)", fn, attention_naive, *_qkv(gqa=False), names
        )


def _sdpa_backend(name: str):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return lambda: sdpa_kernel(getattr(SDPBackend, name))


def attention_cases() -> dict[str, Callable[[], list[Row]]]:
    from trainer import kernels

    cases: dict[str, Callable[[], list[Row]]] = {
        "sdpa (torch's choice)": lambda: attention_rows("sdpa", kernels.attention_sdpa),
    }
    for backend in ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH"):
        name = f"sdpa[{backend.lower()}]"
        cases[name] = lambda n=name, b=backend: attention_rows(
            n, kernels.attention_sdpa, _sdpa_backend(b)
        )
    cases["flash-attn"] = lambda: attention_rows("flash-attn", kernels.attention_flash)
    cases["xformers attention"] = lambda: attention_rows(
        "xformers attention", kernels.attention_xformers
    )
    return cases


# --------------------------------------------------------------------------- norm, MLP, loss


def _rand(*shape, scale=1.0):
    import torch

    return torch.randn(*shape, device=DEVICE, dtype=torch.bfloat16) * scale


def rms_norm_rows(case: str, fn) -> list[Row]:
    from trainer.kernels import rms_norm_eager

    x, w = _rand(4, 256, 768), (1 + 0.1 * _rand(768))
    return compare(
        case,
        lambda x, w: fn(x, w, 1e-5),
        lambda x, w: rms_norm_eager(x, w, 1e-5),
        [x, w],
        _rand(4, 256, 768),
        ["out", "dx", "dw"],
    )


def swiglu_rows(case: str, fn) -> list[Row]:
    from trainer.kernels import swiglu_eager

    x, w13, w2 = _rand(512, 768), _rand(4096, 768, scale=0.03), _rand(768, 2048, scale=0.03)
    return compare(
        case, fn, swiglu_eager, [x, w13, w2], _rand(512, 768), ["out", "dx", "dw13", "dw2"]
    )


def liger_silu_mul(x, w13, w2):
    import torch.nn.functional as F
    from liger_kernel.transformers.functional import liger_swiglu

    gate, up = F.linear(x, w13).chunk(2, dim=-1)
    return F.linear(liger_swiglu(gate.contiguous(), up.contiguous()), w2)


def liger_rms(x, w, eps):
    from liger_kernel.transformers.functional import liger_rms_norm

    return liger_rms_norm(x, w, eps, in_place=False)


def loss_rows(case: str, fn, fused_linear: bool = False) -> list[Row]:
    """A loss must come out float32 and within LOSS_BAR of float64 (bf16 logits in)."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    N, D, V = 2048, 768, 32768
    t = torch.randint(0, V, (N,), device=DEVICE)
    t[:64] = -100
    if fused_linear:
        h, w = _rand(N, D), _rand(V, D, scale=0.05)
        inputs = [h, w]

        def ref(h, w):
            return F.cross_entropy(
                (h @ w.t()).float() if h.dtype != torch.float64 else h @ w.t(), t, ignore_index=-100
            )
    else:
        inputs = [_rand(N, V, scale=4.0)]

        def ref(logits):
            return F.cross_entropy(logits.double(), t, ignore_index=-100)

    got_leaves = [x.detach().clone().requires_grad_() for x in inputs]
    loss = fn(*got_leaves, t)
    loss.backward()
    ref_leaves = [x.detach().double().requires_grad_() for x in inputs]
    exact = ref(*ref_leaves)
    exact.backward()
    rows = [
        Row(
            case,
            f"loss ({str(loss.dtype).removeprefix('torch.')})",
            rel_err(loss, exact) if loss.dtype == torch.float32 else float("inf"),
            None,
            LOSS_BAR,
        )
    ]
    for i, (g, r) in enumerate(zip(got_leaves, ref_leaves, strict=True)):
        # The gradient is stored in bf16 like the input: the bf16 rounding is its bar.
        rows.append(
            Row(
                case,
                f"d{'hw'[i] if fused_linear else 'logits'}",
                rel_err(g.grad, r.grad),
                None,
                2 * 2**-8 + FLOOR,
            )
        )
    return rows


def liger_flce(h, w, t):
    from liger_kernel.transformers.functional import liger_fused_linear_cross_entropy

    return liger_fused_linear_cross_entropy(h, w, t, ignore_index=-100)


def adamw_rows() -> list[Row]:
    """torch's fused AdamW (the trainer's on CUDA) against the for-each one, one step, fp32."""
    import torch

    torch.manual_seed(0)
    params = [torch.randn(1024, 768, device=DEVICE), torch.randn(768, device=DEVICE)]
    grads = [torch.randn_like(p) for p in params]
    out = []
    for fused in (True, False):
        ps = [p.clone().requires_grad_() for p in params]
        opt = torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.1, fused=fused, foreach=not fused)
        for _ in range(3):
            for p, g in zip(ps, grads, strict=True):
                p.grad = g.clone()
            opt.step()
        out.append([p.detach() for p in ps])
    return [
        Row("AdamW fused vs foreach", f"param{i}", rel_err(a, b), None, 1e-6)
        for i, (a, b) in enumerate(zip(*out, strict=True))
    ]


def cases() -> dict[str, Callable[[], list[Row]]]:
    from trainer import kernels

    out = attention_cases()
    out.update(
        {
            "F.rms_norm": lambda: rms_norm_rows("F.rms_norm", kernels.rms_norm_fused),
            "liger rms_norm": lambda: rms_norm_rows("liger rms_norm", liger_rms),
            "xformers swiglu": lambda: swiglu_rows("xformers swiglu", kernels.swiglu_xformers),
            "liger swiglu": lambda: swiglu_rows("liger swiglu", liger_silu_mul),
            "cross_entropy eager": lambda: loss_rows(
                "cross_entropy eager", kernels.cross_entropy_eager
            ),
            "liger cross_entropy": lambda: loss_rows(
                "liger cross_entropy", kernels.cross_entropy_liger
            ),
            "liger fused linear cross_entropy": lambda: loss_rows(
                "liger fused linear cross_entropy", liger_flce, fused_linear=True
            ),
            "AdamW fused": adamw_rows,
        }
    )
    return out


# The case names, in the order they run (tests/trainer/test_cuda.py parametrizes over them).
NAMES = (
    "sdpa (torch's choice)",
    "sdpa[flash_attention]",
    "sdpa[efficient_attention]",
    "sdpa[cudnn_attention]",
    "sdpa[math]",
    "flash-attn",
    "xformers attention",
    "F.rms_norm",
    "liger rms_norm",
    "xformers swiglu",
    "liger swiglu",
    "cross_entropy eager",
    "liger cross_entropy",
    "liger fused linear cross_entropy",
    "AdamW fused",
)

# Which package a case needs; a missing one makes the case "not installed", not a failure.
NEEDS = {
    "flash-attn": "flash_attn",
    "xformers attention": "xformers",
    "xformers swiglu": "xformers",
    "liger rms_norm": "liger_kernel",
    "liger swiglu": "liger_kernel",
    "liger cross_entropy": "liger_kernel",
    "liger fused linear cross_entropy": "liger_kernel",
}


CUDA_ONLY = {
    "sdpa[flash_attention]",
    "sdpa[efficient_attention]",
    "sdpa[cudnn_attention]",
    "flash-attn",
    *NEEDS,
}


def missing(case: str) -> str | None:
    """Why a case cannot run here (its package is not installed, or no CUDA), or None."""
    if DEVICE != "cuda" and case in CUDA_ONLY:
        return "needs CUDA (CPU dry run)"
    pkg = NEEDS.get(case)
    if pkg and importlib.util.find_spec(pkg) is None:
        return f"{pkg} is not installed"
    return None


# The trainer's own availability probe of a case's kernel (trainer/kernels.py).
PROBES = {
    "flash-attn": "flash",
    "xformers attention": "xformers",
    "xformers swiglu": "swiglu_xformers",
    "liger cross_entropy": "cross_entropy_liger",
}


def refused_by_trainer(case: str) -> str | None:
    """Why the trainer will not run this case's kernel here, or None. An installed package
    whose binary does not fit the host's torch (xformers 0.0.35's attention on torch 2.11+cu130:
    "No operator found") is a kernel the trainer never picks, not one that disagrees."""
    probe = PROBES.get(case)
    if probe is None:
        return None
    from trainer import kernels

    ok, why = kernels.available(probe)
    return None if ok else why


def run_case(name: str, fn: Callable[[], list[Row]]) -> tuple[list[Row], str | None]:
    """(rows, None) or ([], why it could not run)."""
    why = missing(name)
    if why:
        return [], why
    try:
        return fn(), None
    except Exception as e:  # an installed kernel that fails on this card is a finding
        return [], f"error: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def main(argv: list[str] | None = None) -> int:
    p = gpucheck.parser(__doc__)
    p.add_argument("--only", default="", help="comma list of case names (default: all)")
    args = p.parse_args(argv)
    gpucheck.require_cuda("kernel_parity", args.cpu_dry_run)
    global DEVICE
    DEVICE = "cpu" if args.cpu_dry_run else "cuda"
    res = gpucheck.Result("kernel_parity", args.out, args.cpu_dry_run)
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    rows: list[Row] = []
    not_run: dict[str, str] = {}
    for name, fn in cases().items():
        if only and name not in only:
            continue
        got, why = run_case(name, fn)
        rows += got
        if why:
            not_run[name] = why
        for r in got:
            base = "-" if r.base is None else f"{r.base:.2e}"
            print(
                f"{r.case:45s} {r.output:16s} err {r.err:.2e}  bf16 naive {base:>8s}  "
                f"bar {r.bar:.2e}  {'ok' if r.ok else 'FAIL'}"
            )
        if why:
            print(f"{name:45s} not run: {why}")
    failed = [r for r in rows if not r.ok]
    for k, v in list(not_run.items()):
        if v.startswith("error") and (why := refused_by_trainer(k)):
            not_run[k] = f"unusable here, refused by the trainer's probe too ({why})"
    errors = {k: v for k, v in not_run.items() if v.startswith("error")}
    if args.cpu_dry_run:
        not_run = {k: v for k, v in not_run.items() if k not in CUDA_ONLY}
    res.details = {
        "rows": [{**r.__dict__, "ok": r.ok} for r in rows],
        "not_run": not_run,
        "table": gpucheck.markdown_table(
            ["case", "output", "rel. error", "naive bf16", "bar", "ok"],
            [
                [
                    r.case,
                    r.output,
                    f"{r.err:.2e}",
                    "-" if r.base is None else f"{r.base:.2e}",
                    f"{r.bar:.2e}",
                    "yes" if r.ok else "NO",
                ]
                for r in rows
            ],
        ),
    }
    cases_run = len({r.case for r in rows})
    res.judge(
        not failed and not errors,
        f"{cases_run} cases, {len(rows) - len(failed)}/{len(rows)} outputs within the bar"
        + (f"; failed: {', '.join(sorted({r.case for r in failed}))}" if failed else "")
        + (f"; not run: {', '.join(f'{k} ({v})' for k, v in not_run.items())}" if not_run else ""),
    )
    res.write()
    print(res.summary)
    return res.exit_code()


if __name__ == "__main__":
    sys.exit(main())
