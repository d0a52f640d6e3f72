"""A LLaMA-style decoder-only transformer in one file, read top-down from parts to whole:

    RMSNorm -> rotary embeddings (real cos/sin) -> grouped-query attention -> SwiGLU
    -> Block -> ModelConfig -> Transformer

The fast kernels (flash-attn, xformers, fused norm and loss) live in trainer/kernels.py and are
chosen once per device type; this file only says *what* is computed.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn

from trainer import kernels, legacy
from trainer.kernels import repeat_kv

__all__ = [
    "ModelConfig",
    "Transformer",
    "apply_rotary_emb",
    "repeat_kv",
    "rope_cos_sin",
    "rope_tables",
    "rotate",
]


class ModelConfigError(ValueError):
    """A model setting is invalid; the message names the flag (``--model.<field>``)."""


# --------------------------------------------------------------------------- parts


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))
        self.impl = kernels.rms_norm_eager  # replaced by Transformer.set_kernels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.impl(x, self.weight, self.eps)


def rope_cos_sin(head_dim: int, max_seq_len: int, theta: float = 10000.0):
    """cos and sin tables, each (max_seq_len, head_dim // 2), for rotary position embeddings.
    Pair i of a head rotates by angle pos * theta^(-2i / head_dim)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)  # (T, D/2)
    return angles.cos(), angles.sin()


def rope_tables(cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(T, D/2) cos/sin -> full-width (T, D) tables [cos, cos] and [-sin, sin] for
    :func:`rotate`, computed once per model instead of per call."""
    return torch.cat((cos, cos), dim=-1), torch.cat((-sin, sin), dim=-1)


def rotate(x: torch.Tensor, cos2: torch.Tensor, sin2: torch.Tensor) -> torch.Tensor:
    """:func:`apply_rotary_emb` with full-width tables from :func:`rope_tables`: four kernels
    (x * cos2 + [x2, x1] * sin2) instead of eight, the same numbers bit for bit (a - b is
    a + (-b) in IEEE arithmetic). x (B, T, H, D) in the tables' dtype is rotated as it is;
    another dtype (bf16 under autocast) is rotated in float32 and cast back."""
    d = x.size(-1) // 2
    xf = x if x.dtype == cos2.dtype else x.float()
    out = (
        xf * cos2[None, :, None, :]
        + torch.cat((xf[..., d:], xf[..., :d]), dim=-1) * sin2[None, :, None, :]
    )
    return out if out.dtype == x.dtype else out.to(x.dtype)


def apply_rotary_emb(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each (x[..., i], x[..., i + D/2]) pair of x (B, T, H, D) by its position's angle:
    (x1 cos - x2 sin, x1 sin + x2 cos). The real-valued form of LLaMA's complex multiply;
    halves instead of interleaved pairs so both halves are contiguous slices."""
    return rotate(x, *rope_tables(cos, sin))


class Attention(nn.Module):
    """Causal self-attention with grouped-query heads: n_kv_heads key/value heads are shared by
    n_heads / n_kv_heads query heads each (n_kv_heads == n_heads is plain multi-head attention).
    q, k and v come from one matmul (wqkv = [wq; wk; wv] stacked by rows); checkpoints with
    separate wq/wk/wv load through :func:`trainer.legacy.fuse_state_dict_hook`."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = cfg.n_heads, cfg.kv_heads, cfg.head_dim
        self.wqkv = nn.Linear(cfg.dim, (cfg.n_heads + 2 * self.n_kv_heads) * cfg.head_dim, False)
        self.wo = nn.Linear(cfg.n_heads * cfg.head_dim, cfg.dim, bias=False)
        self.impl = kernels.attention_naive  # replaced by Transformer.set_kernels

    def forward(self, x: torch.Tensor, cos2: torch.Tensor, sin2: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        H, Hkv = self.n_heads, self.n_kv_heads
        qkv = self.wqkv(x).view(B, T, H + 2 * Hkv, self.head_dim)  # (B, T, H + 2 Hkv, D)
        q, k = rotate(qkv[:, :, : H + Hkv], cos2, sin2).split((H, Hkv), dim=2)  # q and k at once
        v = qkv[:, :, H + Hkv :]  # (B, T, Hkv, D)
        y = self.impl(q, k, v)  # (B, T, H, D); the kernel repeats k/v heads as it needs
        return self.wo(y.reshape(B, T, -1))


class FeedForward(nn.Module):
    """SwiGLU: w2(silu(w1 x) * w3 x), with w1 (gate) and w3 (up) as one matmul w13 = [w1; w3]."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w13 = nn.Linear(dim, 2 * hidden, bias=False)  # gate rows, then up rows
        self.w2 = nn.Linear(hidden, dim, bias=False)  # down
        self.impl = kernels.swiglu_eager  # replaced by Transformer.set_kernels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.impl(x, self.w13.weight, self.w2.weight)


class Block(nn.Module):
    """Pre-norm residual block: x + attn(norm(x)), then x + ffn(norm(x))."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.attention_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.attention = Attention(cfg)
        self.ffn_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.feed_forward = FeedForward(cfg.dim, cfg.ffn_hidden_dim)

    def forward(self, x: torch.Tensor, cos2: torch.Tensor, sin2: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), cos2, sin2)
        return x + self.feed_forward(self.ffn_norm(x))


# --------------------------------------------------------------------------- config


@dataclass
class ModelConfig:
    """Shape of the model. ``vocab_size = 0`` means "take it from the data manifest"."""

    vocab_size: int = 0
    dim: int = 768
    n_layers: int = 12
    n_heads: int = 12
    n_kv_heads: int = 0  # 0: same as n_heads (multi-head attention)
    ffn_hidden: int = 0  # 0: LLaMA's 2/3 * 4 * dim rounded up to multiple_of
    multiple_of: int = 64
    max_seq_len: int = 1024
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    tie_embeddings: bool = True
    init_std: float = 0.02
    attention: str = ""  # force a kernel: flash, xformers, sdpa, naive ("" = best available)

    def __post_init__(self) -> None:
        def bad(field: str, why: str) -> ModelConfigError:
            return ModelConfigError(f"--model.{field}={getattr(self, field)!r}: {why}")

        for f in ("dim", "n_layers", "n_heads", "max_seq_len", "multiple_of"):
            if getattr(self, f) <= 0:
                raise bad(f, "must be > 0")
        for f in ("vocab_size", "n_kv_heads", "ffn_hidden"):
            if getattr(self, f) < 0:
                raise bad(f, "must be >= 0 (0 means automatic)")
        if self.dim % self.n_heads:
            raise bad("dim", f"must be divisible by --model.n_heads={self.n_heads}")
        if self.head_dim % 2:
            raise bad("dim", f"dim / n_heads = {self.head_dim} must be even for rotary embeddings")
        if self.n_heads % self.kv_heads:
            raise bad("n_kv_heads", f"must divide --model.n_heads={self.n_heads}")
        if self.rope_theta <= 0:
            raise bad("rope_theta", "must be > 0")
        if not 0 < self.norm_eps < 1:
            raise bad("norm_eps", "must be in (0, 1)")
        if self.init_std <= 0:
            raise bad("init_std", "must be > 0")
        if self.attention and self.attention not in kernels.ATTENTION_BACKENDS:
            raise bad(
                "attention", f"must be empty or one of {', '.join(kernels.ATTENTION_BACKENDS)}"
            )

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads or self.n_heads

    @property
    def ffn_hidden_dim(self) -> int:
        if self.ffn_hidden:
            return self.ffn_hidden
        hidden = int(2 * 4 * self.dim / 3)
        return self.multiple_of * math.ceil(hidden / self.multiple_of)

    def to_dict(self) -> dict:
        return asdict(self)


# --------------------------------------------------------------------------- model


class Transformer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        if cfg.vocab_size <= 0:
            raise ModelConfigError(
                "--model.vocab_size is 0: set it, or point --data.dir at a prepared directory "
                "whose manifest.json gives it"
            )
        self.cfg = cfg
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.output = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.output.weight = self.tok_embeddings.weight
        cos2, sin2 = rope_tables(*rope_cos_sin(cfg.head_dim, cfg.max_seq_len, cfg.rope_theta))
        self.register_buffer("rope_cos", cos2, persistent=False)  # (max_seq_len, head_dim)
        self.register_buffer("rope_sin", sin2, persistent=False)  # [-sin, sin]
        self.register_load_state_dict_pre_hook(legacy.fuse_state_dict_hook)
        self.kernels: kernels.KernelSet | None = None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """N(0, init_std) everywhere; the projections that write into the residual stream (wo,
        w2) are scaled by 1/sqrt(2 * n_layers) so its variance does not grow with depth (GPT-2).
        The fused wqkv and w13 are drawn block by block (wq, wk, wv; w1, w3) in the order the
        separate matrices were, so a seed gives the same weights as before the fusion."""
        std = self.cfg.init_std
        for name, p in self.named_parameters():
            if name.endswith("norm.weight"):
                nn.init.ones_(p)
            elif name.endswith(("wo.weight", "w2.weight")):
                nn.init.normal_(p, mean=0.0, std=std / math.sqrt(2 * self.cfg.n_layers))
            else:
                for block in p.data.split(self._fused_rows(name), dim=0):
                    nn.init.normal_(block, mean=0.0, std=std)

    def _fused_rows(self, name: str) -> list[int]:
        """Row counts of the matrices a parameter stacks (one entry when it stacks none)."""
        c = self.cfg
        if name.endswith("attention.wqkv.weight"):
            return [c.n_heads * c.head_dim, c.kv_heads * c.head_dim, c.kv_heads * c.head_dim]
        if name.endswith("feed_forward.w13.weight"):
            return [c.ffn_hidden_dim, c.ffn_hidden_dim]
        return [self.get_parameter(name).size(0)]

    def set_kernels(self, ks: kernels.KernelSet) -> None:
        """Point every layer at the kernels of one device type and dtype (trainer/kernels.py).
        Set them before ``torch.compile``: the compiled forward does not choose them."""
        self.kernels = ks
        for m in self.modules():
            if isinstance(m, RMSNorm):
                m.impl = ks.rms_norm
            elif isinstance(m, Attention):
                m.impl = ks.attention
            elif isinstance(m, FeedForward):
                m.impl = ks.swiglu

    def compute_dtype(self, device_type: str) -> torch.dtype:
        """The dtype the matmuls run in: autocast's when it is on, else the weights'."""
        if torch.is_autocast_enabled(device_type):
            return torch.get_autocast_dtype(device_type)
        return self.tok_embeddings.weight.dtype

    def _match_kernels(self, device_type: str) -> None:
        """Choose the kernels again when the device type or compute dtype changed."""
        dtype = self.compute_dtype(device_type)
        ks = self.kernels
        if ks is None or ks.device_type != device_type or ks.dtype != dtype:
            self.set_kernels(kernels.select(device_type, self.cfg.attention or None, dtype))

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        """idx (B, T) token ids -> logits (B, T, V), or the mean cross-entropy when targets
        (B, T) are given (target -100 is ignored)."""
        # A compiled forward keeps the kernels set before compiling (the trainer sets them).
        if self.kernels is None or not torch.compiler.is_compiling():
            self._match_kernels(idx.device.type)
        B, T = idx.shape
        if self.cfg.max_seq_len < T:
            raise ValueError(f"sequence length {T} > --model.max_seq_len={self.cfg.max_seq_len}")
        h = self.tok_embeddings(idx)  # (B, T, dim)
        cos2, sin2 = self.rope_cos[:T], self.rope_sin[:T]
        for layer in self.layers:
            h = layer(h, cos2, sin2)
        logits = self.output(self.norm(h))  # (B, T, V)
        if targets is None:
            return logits
        return self.kernels.cross_entropy(logits.view(B * T, -1), targets.reshape(B * T))

    # ----------------------------------------------------------------------- accounting

    def num_params(self, exclude_embedding: bool = False) -> int:
        """Unique parameters. With ``exclude_embedding`` the input embedding table is left out
        when it is not tied (a lookup, not a matmul); a tied table is the output matmul: kept."""
        n = sum(p.numel() for p in self.parameters())
        if exclude_embedding and not self.cfg.tie_embeddings:
            n -= self.tok_embeddings.weight.numel()
        return n

    def flops_per_token(self, seq_len: int | None = None) -> float:
        """Training FLOPs per token (forward + backward), PaLM appendix B / nanoGPT:
        6 * N for the weight matmuls (2 forward, 4 backward per multiply-add, N = matmul
        parameters) plus 12 * L * H * Q * T for attention scores and weighted values
        (L layers, H heads, Q head dim, T context). The causal mask halves the real attention
        work; the convention counts it whole so MFU numbers compare with published ones."""
        c = self.cfg
        T = seq_len or c.max_seq_len
        return (
            6 * self.num_params(exclude_embedding=True)
            + 12 * c.n_layers * c.n_heads * c.head_dim * T
        )
