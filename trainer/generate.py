"""Text generation from a trained model: greedy, temperature with top-k / top-p, beam search.

    python -m trainer.generate --checkpoint checkpoints/demo --prompt "def main(" --top-k 50
    python -m trainer.generate --checkpoint checkpoints/demo --prompt "import " --beam 4

No KV cache: every new token re-runs the (cropped) context, which is simple and fast enough for
the small models this repository trains on a CPU. Token ids in, token ids out; the command line
adds the tokenizer.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from trainer.model import ModelConfig, Transformer


def _next_logits(model: Transformer, idx: torch.Tensor) -> torch.Tensor:
    """Logits (B, V) for the token after idx (B, T), the context cropped to max_seq_len."""
    ctx = idx[:, -model.cfg.max_seq_len :]
    return model(ctx)[:, -1, :].float()


def filter_logits(
    logits: torch.Tensor, top_k: int | None = None, top_p: float | None = None
) -> torch.Tensor:
    """Set to -inf every logit outside the top_k largest and outside the smallest set whose
    probability reaches top_p (nucleus). The most likely token always survives."""
    if top_k is not None and top_k > 0 and top_k < logits.size(-1):
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and 0 < top_p < 1:
        sorted_logits, order = torch.sort(logits, descending=True, dim=-1)
        cum = torch.softmax(sorted_logits, dim=-1).cumsum(dim=-1)
        drop = cum - torch.softmax(sorted_logits, dim=-1) >= top_p  # mass before this token
        drop[..., 0] = False
        sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
        logits = torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits)
    return logits


@torch.no_grad()
def sample(
    model: Transformer,
    idx: torch.Tensor,
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    eos_id: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Extend idx (B, T) by up to max_new_tokens tokens. temperature 0 is greedy decoding.
    Rows that produced eos_id keep emitting it; generation stops once every row has."""
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    model.eval()
    done = torch.zeros(idx.size(0), dtype=torch.bool, device=idx.device)
    for _ in range(max_new_tokens):
        logits = _next_logits(model, idx)
        if temperature == 0:
            nxt = logits.argmax(dim=-1)
        else:
            logits = filter_logits(logits / temperature, top_k, top_p)
            probs = torch.softmax(logits, dim=-1)
            nxt = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
        if eos_id is not None:
            nxt = torch.where(done, torch.full_like(nxt, eos_id), nxt)
            done |= nxt == eos_id
        idx = torch.cat([idx, nxt[:, None]], dim=1)
        if eos_id is not None and bool(done.all()):
            break
    return idx


def greedy(
    model: Transformer, idx: torch.Tensor, max_new_tokens: int, eos_id: int | None = None
) -> torch.Tensor:
    return sample(model, idx, max_new_tokens, temperature=0.0, eos_id=eos_id)


@torch.no_grad()
def beam_search(
    model: Transformer,
    prompt: torch.Tensor,
    max_new_tokens: int,
    *,
    beam_width: int = 4,
    length_penalty: float = 1.0,
    eos_id: int | None = None,
) -> tuple[torch.Tensor, float]:
    """Best continuation of one prompt (T,) or (1, T) by beam search; returns (ids (T + n,),
    score). A hypothesis scores sum(log p) / n ** length_penalty over its n generated tokens:
    0 favours short ones, larger values long ones."""
    if beam_width < 1:
        raise ValueError(f"beam_width must be >= 1, got {beam_width}")
    model.eval()
    prompt = prompt.reshape(1, -1)
    T0 = prompt.size(1)
    beams = prompt  # (n_beams, T)
    scores = torch.zeros(1, device=prompt.device)  # summed log-probabilities
    finished: list[tuple[float, torch.Tensor]] = []

    def normalised(total: float, length: int) -> float:
        return total / max(length, 1) ** length_penalty

    for step in range(1, max_new_tokens + 1):
        logp = torch.log_softmax(_next_logits(model, beams), dim=-1)  # (n_beams, V)
        V = logp.size(-1)
        cand = (scores[:, None] + logp).view(-1)  # (n_beams * V,)
        top = torch.topk(cand, min(2 * beam_width, cand.numel()))
        new_beams, new_scores = [], []
        for total, flat in zip(top.values.tolist(), top.indices.tolist(), strict=True):
            b, tok = divmod(flat, V)
            seq = torch.cat([beams[b], beams.new_tensor([tok])])
            if eos_id is not None and tok == eos_id:
                finished.append((normalised(total, step), seq))
            else:
                new_beams.append(seq)
                new_scores.append(total)
            if len(new_beams) == beam_width:
                break
        if not new_beams:
            break
        beams, scores = torch.stack(new_beams), torch.tensor(new_scores, device=prompt.device)
        best_alive = max(normalised(s, step) for s in new_scores)
        if len(finished) >= beam_width and max(f[0] for f in finished) >= best_alive:
            break  # with a non-positive log-prob per token, alive beams only get worse
    length = beams.size(1) - T0
    finished += [(normalised(float(s), length), b) for s, b in zip(scores, beams, strict=True)]
    score, best = max(finished, key=lambda f: f[0])
    return best, score


# --------------------------------------------------------------------------- command line


def load_model(path: str, device: str = "cpu") -> tuple[Transformer, dict]:
    """A model from a checkpoint directory (or a directory of them: the newest) and its config."""
    from trainer import checkpoint

    ckpt = checkpoint.resolve(path, path)
    assert ckpt is not None
    main, _ = checkpoint.load(ckpt, map_location=device)
    model = Transformer(ModelConfig(**main["config"]["model"])).to(device)
    model.load_state_dict(main["model"])
    return model.eval(), main["config"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m trainer.generate", description=__doc__.split("\n")[0]
    )
    p.add_argument(
        "--checkpoint", required=True, help="checkpoint directory (step_* or its parent)"
    )
    p.add_argument("--prompt", default="", help="text to continue")
    p.add_argument("--tokenizer", help="tokenizer.json (default: the one in the run's data.dir)")
    p.add_argument("--max-new-tokens", type=int, default=100)
    p.add_argument("--temperature", type=float, default=0.8, help="0 = greedy")
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--top-p", type=float, default=None)
    p.add_argument("--greedy", action="store_true")
    p.add_argument("--beam", type=int, default=0, help="beam width (beam search when > 0)")
    p.add_argument("--length-penalty", type=float, default=1.0)
    p.add_argument("--num-samples", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    args = p.parse_args(argv)

    from trainer.tokenizer import Tokenizer

    try:
        model, config = load_model(args.checkpoint, args.device)
    except FileNotFoundError as e:
        p.error(str(e))
    tok_path = Path(args.tokenizer or Path(config["data"]["dir"]) / "tokenizer.json")
    if not tok_path.is_file():
        p.error(f"--tokenizer: {tok_path} not found (pass the run's tokenizer.json)")
    tok = Tokenizer.load(tok_path)
    ids = [tok.bos_id, *tok.encode(args.prompt)]
    idx = torch.tensor([ids], dtype=torch.long, device=args.device)
    gen = torch.Generator(device=args.device).manual_seed(args.seed)
    for i in range(args.num_samples):
        if args.beam > 0:
            out, score = beam_search(
                model,
                idx,
                args.max_new_tokens,
                beam_width=args.beam,
                length_penalty=args.length_penalty,
                eos_id=tok.eos_id,
            )
            text = tok.decode(out.tolist()[1:], skip_special_tokens=True)
            print(f"--- beam (score {score:.3f})\n{text}")
            break
        temp = 0.0 if args.greedy else args.temperature
        out = sample(
            model,
            idx,
            args.max_new_tokens,
            temperature=temp,
            top_k=args.top_k,
            top_p=args.top_p,
            eos_id=tok.eos_id,
            generator=gen,
        )
        print(f"--- sample {i + 1}\n{tok.decode(out[0].tolist()[1:], skip_special_tokens=True)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
