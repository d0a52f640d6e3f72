"""Training-step time of the trainer's model vs nanoGPT's at the demo shape, on CPU, in one run.

    .venv/bin/python scripts/bench/bench_step.py [--rounds 8] [--steps 10] [--warmup 5]
        [--threads 2] [--no-loop]

Shape (issue 13, trainer/configs/demo.toml): 4 layers, 4 heads, dim 128, context 128, vocab
4096, batch 8 x 128 tokens, fp32, no torch.compile. Both models have 196,608 matmul parameters
per layer (the trainer: grouped-query attention with 2 kv heads and a SwiGLU of hidden 384;
nanoGPT: full qkv and a GELU MLP of 4 x dim).

A step is what both training loops do per optimizer step: forward with loss, backward,
clip_grad_norm_(1.0), AdamW step, zero_grad(set_to_none=True), on the same random token batch.

    trainer   the model and optimizer exactly as trainer/train.py's Trainer builds them
              (demo.toml, synthetic source only so no data files are needed; logging off)
    nanoGPT   a re-implementation of karpathy/nanoGPT's model.py (master as of 2024-2025,
              commit 93a43d9a "LayerNorm with optional bias"): GPT with learned position
              embeddings, LayerNorm (bias=False here, as nanoGPT's bias option), a fused c_attn
              Linear for q/k/v, F.scaled_dot_product_attention(is_causal=True), GELU MLP 4x,
              weight tying wte/lm_head, its init (N(0, 0.02), c_proj scaled by
              1/sqrt(2 n_layer)) and configure_optimizers (AdamW, decay on >= 2-d params,
              fused only on CUDA). dropout 0. nanoGPT's repository cannot be reached from this
              machine, so it is rewritten here from its model.py, not imported.
    loop      (with the trainer only) Trainer.train_step() + log_step() on the synthetic
              stream with the no-op logger: the model step plus data, timers and bookkeeping.

The two models alternate in rounds (trainer, nanoGPT, nanoGPT, trainer, ...) so drift on a
shared machine hits both; each round runs ``--steps`` timed steps after ``--warmup`` untimed
ones, and the table gives the median and minimum step time over all timed steps.

``--curve N [--save-curve F | --compare-curve F]`` trains the trainer N steps instead (fixed
seed, synthetic stream) and saves or compares its train/loss curve: the check that a speed
change left the model's function alone.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from trainer.config import load_config  # noqa: E402
from trainer.metrics import NullLogger  # noqa: E402
from trainer.train import Trainer  # noqa: E402

VOCAB, N_LAYER, N_HEAD, DIM, CONTEXT, BATCH = 4096, 4, 4, 128, 128, 8

# --------------------------------------------------------------------------- nanoGPT


class LayerNorm(nn.Module):
    def __init__(self, ndim: int, bias: bool):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int, bias: bool):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=bias)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=bias)
        self.n_head, self.n_embd = n_head, n_embd

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, n_embd: int, bias: bool):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd, bias=bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * n_embd, n_embd, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(self.gelu(self.c_fc(x)))


class GPTBlock(nn.Module):
    def __init__(self, n_embd: int, n_head: int, bias: bool):
        super().__init__()
        self.ln_1 = LayerNorm(n_embd, bias)
        self.attn = CausalSelfAttention(n_embd, n_head, bias)
        self.ln_2 = LayerNorm(n_embd, bias)
        self.mlp = MLP(n_embd, bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int, block_size: int, n_layer: int, n_head: int, n_embd: int):
        super().__init__()
        bias = False
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(vocab, n_embd),
                wpe=nn.Embedding(block_size, n_embd),
                h=nn.ModuleList([GPTBlock(n_embd, n_head, bias) for _ in range(n_layer)]),
                ln_f=LayerNorm(n_embd, bias),
            )
        )
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        t = idx.size(1)
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)

    def configure_optimizers(self, weight_decay: float, lr: float, betas: tuple[float, float]):
        params = [p for p in self.parameters() if p.requires_grad]
        groups = [
            {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
        ]
        return torch.optim.AdamW(groups, lr=lr, betas=betas)  # fused only on CUDA in nanoGPT


# --------------------------------------------------------------------------- the contenders


def trainer_for_bench(threads: int) -> Trainer:
    cfg = load_config(
        str(ROOT / "trainer/configs/demo.toml"),
        [
            "--data.source",
            "synthetic",
            "--model.vocab_size",
            str(VOCAB),
            "--logging.enabled",
            "false",
            "--train.threads",
            str(threads),
            "--train.steps",
            "1000000",
            "--train.eval_every",
            "0",
            "--train.ckpt_every",
            "0",
            "--logging.print_every",
            "0",
        ],
    )
    m, d = cfg.model, cfg.data
    assert (m.n_layers, m.n_heads, m.dim, m.max_seq_len) == (N_LAYER, N_HEAD, DIM, CONTEXT)
    assert (d.batch_size, d.seq_len, d.grad_accum) == (BATCH, CONTEXT, 1)
    return Trainer(cfg, logger=NullLogger())


def model_step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor):
    def step() -> None:
        loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def loop_step(trainer: Trainer) -> Callable[[], None]:
    def step() -> None:
        trainer.log_step(*trainer.train_step())

    return step


def time_steps(fn: Callable[[], None], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def matmul_params_per_layer(model: nn.Module, layer: nn.Module) -> int:
    return sum(p.numel() for p in layer.parameters() if p.dim() == 2)


class LossRecorder(NullLogger):
    def __init__(self) -> None:
        super().__init__()
        self.loss: dict[int, float] = {}

    def log(self, metrics, step):
        if "train/loss" in metrics:
            self.loss[step] = float(metrics["train/loss"])


def loss_curve(steps: int, threads: int) -> list[float]:
    """The demo-shape trainer's train/loss for ``steps`` steps on the synthetic stream (seed
    1337, demo.toml's schedule and optimizer), for before/after comparisons of the model."""
    trainer = trainer_for_bench(threads)
    rec = LossRecorder()
    trainer.logger = rec
    try:
        for _ in range(steps):
            trainer.log_step(*trainer.train_step())
    finally:
        trainer.close()
    return [rec.loss[s] for s in range(1, steps + 1)]


def curve_command(args: argparse.Namespace) -> int:
    losses = loss_curve(args.curve, args.threads)
    print(f"{args.curve} steps: first {losses[0]:.6f}, last {losses[-1]:.6f}")
    if args.save_curve:
        Path(args.save_curve).write_text(json.dumps({"torch": torch.__version__, "loss": losses}))
    if args.compare_curve:
        ref = json.loads(Path(args.compare_curve).read_text())["loss"]
        diffs = [abs(a - b) for a, b in zip(losses, ref, strict=True)]
        worst = max(range(len(diffs)), key=diffs.__getitem__)
        print(
            f"vs {args.compare_curve}: max |diff| {diffs[worst]:.2e} at step {worst + 1}, "
            f"mean of last 20: {statistics.fmean(losses[-20:]):.6f} "
            f"vs {statistics.fmean(ref[-20:]):.6f}"
        )
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--steps", type=int, default=10, help="timed steps per round")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps per round")
    ap.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    ap.add_argument("--no-loop", action="store_true", help="skip the trainer's whole-loop row")
    ap.add_argument("--curve", type=int, default=0, help="instead: train N steps, print loss")
    ap.add_argument("--save-curve", help="with --curve: write the losses to this JSON file")
    ap.add_argument("--compare-curve", help="with --curve: compare with a saved JSON file")
    args = ap.parse_args()
    if args.curve:
        torch.set_num_threads(args.threads)
        return curve_command(args)

    torch.set_num_threads(args.threads)
    trainer = trainer_for_bench(args.threads)
    torch.manual_seed(0)
    gpt = GPT(VOCAB, CONTEXT, N_LAYER, N_HEAD, DIM)
    gpt_opt = gpt.configure_optimizers(0.1, 2e-3, (0.9, 0.95))
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, VOCAB, (BATCH, CONTEXT), generator=g)
    y = torch.randint(0, VOCAB, (BATCH, CONTEXT), generator=g)

    contenders: dict[str, Callable[[], None]] = {
        "trainer": model_step(trainer.raw_model, trainer.optimizer, x, y),
        "nanoGPT": model_step(gpt, gpt_opt, x, y),
    }
    if not args.no_loop:
        contenders["trainer loop"] = loop_step(trainer)
    times: dict[str, list[float]] = {k: [] for k in contenders}
    names = list(contenders)
    t_start = time.perf_counter()
    for r in range(args.rounds):
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            time_steps(contenders[name], args.warmup)
            times[name] += time_steps(contenders[name], args.steps)

    tokens = BATCH * CONTEXT
    print(
        f"torch {torch.__version__}, {args.threads} threads, {platform.processor() or 'cpu'}, "
        f"{os.cpu_count()} cores, load average {', '.join(f'{v:.1f}' for v in os.getloadavg())}"
    )
    print(
        f"shape: {N_LAYER} layers, {N_HEAD} heads, dim {DIM}, context {CONTEXT}, vocab {VOCAB}, "
        f"batch {BATCH} x {CONTEXT}; {args.rounds} rounds x {args.steps} steps "
        f"({time.perf_counter() - t_start:.0f} s)"
    )
    tm, gm = trainer.raw_model, gpt
    print(
        f"params: trainer {tm.num_params() / 1e6:.3f}M ({len(list(tm.parameters()))} tensors, "
        f"{matmul_params_per_layer(tm, tm.layers[0]):,} matmul/layer, "
        f"kernels {tm.kernels.names() if tm.kernels else {}}); "
        f"nanoGPT {sum(p.numel() for p in gm.parameters()) / 1e6:.3f}M "
        f"({len(list(gm.parameters()))} tensors, "
        f"{matmul_params_per_layer(gm, gm.transformer.h[0]):,} matmul/layer)"
    )
    base = statistics.median(times["nanoGPT"])
    print()
    print("| step | median ms | min ms | tokens/s (median) | × nanoGPT tokens/s |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name in names:
        med, lo = statistics.median(times[name]), min(times[name])
        print(
            f"| {name} | {med * 1e3:.2f} | {lo * 1e3:.2f} | {tokens / med:,.0f} | "
            f"{base / med:.3f} |"
        )
    trainer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
