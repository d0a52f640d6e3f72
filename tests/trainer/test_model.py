"""The model, its kernels and generation, on CPU with real torch."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from trainer import kernels, legacy
from trainer.generate import beam_search, filter_logits, greedy, sample
from trainer.model import (
    ModelConfig,
    ModelConfigError,
    Transformer,
    apply_rotary_emb,
    repeat_kv,
    rope_cos_sin,
    rope_tables,
    rotate,
)


def tiny(**kw) -> ModelConfig:
    base = dict(vocab_size=97, dim=32, n_layers=2, n_heads=4, n_kv_heads=2, max_seq_len=16)
    return ModelConfig(**{**base, **kw})


@pytest.fixture(autouse=True)
def _fresh_kernel_choice(monkeypatch):
    monkeypatch.delenv(kernels.ENV_ATTN, raising=False)
    kernels.clear_cache()
    yield
    kernels.clear_cache()


# --------------------------------------------------------------------------- shapes and config


def test_forward_gives_logits_per_position_and_a_scalar_loss():
    torch.manual_seed(0)
    model = Transformer(tiny())
    idx = torch.randint(0, 97, (3, 10))
    assert model(idx).shape == (3, 10, 97)
    loss = model(idx, torch.randint(0, 97, (3, 10)))
    assert loss.shape == ()
    # An untrained model is close to uniform over the vocabulary.
    assert abs(loss.item() - math.log(97)) < 0.5


def test_tied_embeddings_share_one_matrix_and_untied_do_not():
    tied, untied = Transformer(tiny(tie_embeddings=True)), Transformer(tiny(tie_embeddings=False))
    assert tied.output.weight is tied.tok_embeddings.weight
    assert untied.output.weight is not untied.tok_embeddings.weight
    assert untied.num_params() - tied.num_params() == 97 * 32
    # Untied: the input table is a lookup, not a matmul, so it is left out of the FLOP count.
    assert untied.num_params(exclude_embedding=True) == tied.num_params()


def test_flops_per_token_is_6n_plus_the_attention_term():
    model = Transformer(tiny())
    c = model.cfg
    expected = 6 * model.num_params(exclude_embedding=True) + 12 * 2 * 4 * 8 * 16
    assert model.flops_per_token() == expected
    assert model.flops_per_token(seq_len=8) == expected - 12 * c.n_layers * c.n_heads * 8 * 8


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("dim", 30, "--model.dim=30: must be divisible by --model.n_heads=4"),
        ("n_kv_heads", 3, "--model.n_kv_heads=3: must divide --model.n_heads=4"),
        ("n_layers", 0, "--model.n_layers=0: must be > 0"),
        ("attention", "cudnn", "--model.attention='cudnn'"),
    ],
)
def test_config_errors_name_the_flag(field, value, needle):
    with pytest.raises(ModelConfigError) as e:
        tiny(**{field: value})
    assert needle in str(e.value)


def test_sequence_longer_than_max_seq_len_is_refused():
    with pytest.raises(ValueError, match="max_seq_len=16"):
        Transformer(tiny())(torch.zeros(1, 17, dtype=torch.long))


def test_vocab_size_zero_is_refused_when_building_the_model():
    with pytest.raises(ModelConfigError, match="vocab_size"):
        Transformer(tiny(vocab_size=0))


def test_the_model_is_causal():
    torch.manual_seed(0)
    model = Transformer(tiny())
    a = torch.randint(0, 97, (1, 12))
    b = a.clone()
    b[0, 8:] = (b[0, 8:] + 1) % 97
    with torch.no_grad():
        la, lb = model(a), model(b)
    torch.testing.assert_close(la[:, :8], lb[:, :8])
    assert not torch.allclose(la[:, 8:], lb[:, 8:])


# --------------------------------------------------------------------------- RoPE and GQA


def test_rope_position_zero_is_the_identity_and_norms_are_kept():
    cos, sin = rope_cos_sin(8, 16)
    x = torch.randn(2, 16, 3, 8)
    y = apply_rotary_emb(x, cos, sin)
    torch.testing.assert_close(y[:, 0], x[:, 0])
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1))


def test_rope_scores_depend_only_on_the_relative_position():
    cos, sin = rope_cos_sin(8, 32)
    q, k = torch.randn(8), torch.randn(8)

    def score(m: int, n: int) -> torch.Tensor:
        qs = q.expand(1, 32, 1, 8)
        ks = k.expand(1, 32, 1, 8)
        return apply_rotary_emb(qs, cos, sin)[0, m, 0] @ apply_rotary_emb(ks, cos, sin)[0, n, 0]

    torch.testing.assert_close(score(5, 2), score(13, 10))
    torch.testing.assert_close(score(20, 20), score(0, 0))
    assert not torch.allclose(score(5, 2), score(5, 4))


def test_the_models_rope_is_bit_for_bit_the_written_out_rotation():
    cos, sin = rope_cos_sin(8, 16)
    x = torch.randn(2, 16, 3, 8)
    x1, x2 = x[..., :4], x[..., 4:]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    written_out = torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1)
    assert torch.equal(rotate(x, *rope_tables(cos, sin)), written_out)
    # bf16 (autocast) is rotated in float32 and rounded once at the end
    xb = x.bfloat16()
    yb = rotate(xb, *rope_tables(cos, sin))
    assert yb.dtype == torch.bfloat16
    assert torch.equal(yb, rotate(xb.float(), *rope_tables(cos, sin)).bfloat16())


def test_repeat_kv_equals_repeat_interleave():
    x = torch.randn(2, 5, 3, 4)
    torch.testing.assert_close(repeat_kv(x, 4), torch.repeat_interleave(x, dim=2, repeats=4))
    assert repeat_kv(x, 1) is x


def test_gqa_with_kv_heads_equal_to_heads_is_multi_head_attention():
    torch.manual_seed(0)
    mha = Transformer(tiny(n_kv_heads=0))
    torch.manual_seed(0)
    gqa = Transformer(tiny(n_kv_heads=4))
    assert mha.cfg.kv_heads == gqa.cfg.kv_heads == 4
    idx = torch.randint(0, 97, (2, 9))
    with torch.no_grad():
        torch.testing.assert_close(mha(idx), gqa(idx))


def test_gqa_shares_each_kv_head_between_query_heads():
    """Attention with 2 kv heads equals MHA whose k/v heads are the repeated kv heads."""
    torch.manual_seed(0)
    q = torch.randn(2, 7, 4, 8)
    k, v = torch.randn(2, 7, 2, 8), torch.randn(2, 7, 2, 8)
    ref = kernels.attention_naive(q, repeat_kv(k, 2), repeat_kv(v, 2))
    torch.testing.assert_close(kernels.attention_naive(q, k, v), ref)
    torch.testing.assert_close(kernels.attention_sdpa(q, k, v), ref, atol=1e-5, rtol=1e-5)


# --------------------------------------------------------------------------- kernels


def test_without_cuda_the_fallbacks_are_chosen(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    kernels.clear_cache()
    ks = kernels.select("cpu")
    assert ks.names() == {
        "attention": "sdpa",
        "swiglu": "eager",
        "rms_norm": "fused" if hasattr(torch.nn.functional, "rms_norm") else "eager",
        "cross_entropy": "eager",
    }
    # Asked for the CUDA device type without CUDA, nothing CUDA-only is picked either.
    ks_cuda = kernels.select("cuda")
    assert ks_cuda.attention_name == "sdpa"
    assert ks_cuda.swiglu_name == "eager" and ks_cuda.cross_entropy_name == "eager"
    ok, why = kernels.available("flash")
    assert not ok and "CUDA" in why


def test_override_by_env_and_by_argument(monkeypatch):
    monkeypatch.setenv(kernels.ENV_ATTN, "naive")
    assert kernels.select("cpu").attention_name == "naive"
    assert kernels.select("cpu", attention="sdpa").attention_name == "sdpa"


def test_forcing_a_kernel_that_cannot_run_raises_with_the_reason(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    kernels.clear_cache()
    with pytest.raises(RuntimeError, match="'flash' was requested but cannot run"):
        kernels.select("cpu", attention="flash")
    with pytest.raises(ValueError, match="not one of"):
        kernels.select("cpu", attention="bogus")


def test_the_model_picks_kernels_for_its_device_and_records_their_names():
    model = Transformer(tiny(attention="naive"))
    model(torch.zeros(1, 4, dtype=torch.long))
    assert model.kernels is not None and model.kernels.attention_name == "naive"
    assert model.layers[0].attention.impl is kernels.attention_naive


# The CUDA kernels' parity in bf16 (flash-attn, xformers, liger, SDPA's backends): test_cuda.py.


def test_sdpa_attention_matches_naive():
    torch.manual_seed(0)
    q = torch.randn(2, 33, 8, 64)
    k, v = torch.randn(2, 33, 2, 64), torch.randn(2, 33, 2, 64)
    torch.testing.assert_close(
        kernels.attention_sdpa(q, k, v), kernels.attention_naive(q, k, v), atol=1e-5, rtol=1e-5
    )


def test_fused_rms_norm_matches_eager():
    if not kernels.available("rms_norm_fused")[0]:
        pytest.skip("torch has no F.rms_norm (needs torch >= 2.4)")
    x, w = torch.randn(4, 7, 32), torch.randn(32)
    torch.testing.assert_close(
        kernels.rms_norm_fused(x, w, 1e-5), kernels.rms_norm_eager(x, w, 1e-5)
    )


def test_model_output_is_the_same_with_naive_and_sdpa_attention():
    torch.manual_seed(0)
    model = Transformer(tiny())
    idx = torch.randint(0, 97, (2, 16))
    with torch.no_grad():
        model.set_kernels(kernels.select("cpu", attention="naive"))
        a = model(idx)
        model.set_kernels(kernels.select("cpu", attention="sdpa"))
        b = model(idx)
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


# --------------------------------------------------------------------------- generation


def _counting_model() -> Transformer:
    """A model trained for a moment to continue 0,1,2,... (mod 11): one right continuation."""
    torch.manual_seed(0)
    model = Transformer(ModelConfig(vocab_size=11, dim=32, n_layers=1, n_heads=2, max_seq_len=16))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    base = torch.arange(17)
    for _ in range(150):
        starts = torch.randint(0, 11, (16, 1))
        seq = (starts + base) % 11
        loss = model(seq[:, :-1], seq[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.1
    return model.eval()


@pytest.fixture(scope="module")
def counting_model() -> Transformer:
    return _counting_model()


@pytest.mark.slow  # 4-28 s of CPU: out of the fast lane
def test_greedy_continues_the_learned_pattern(counting_model):
    out = greedy(counting_model, torch.tensor([[3, 4, 5]]), 6)
    assert out.tolist() == [[3, 4, 5, 6, 7, 8, 9, 10, 0]]


@pytest.mark.slow
def test_generation_longer_than_the_context_crops_it(counting_model):
    out = greedy(counting_model, torch.tensor([[0, 1]]), 20)
    assert out.shape == (1, 22)
    assert out[0, -1].item() == 21 % 11


def test_top_k_one_is_greedy_and_sampling_is_reproducible(counting_model):
    prompt = torch.tensor([[1, 2, 3]])
    g = torch.Generator().manual_seed(1)
    assert torch.equal(
        sample(counting_model, prompt, 5, top_k=1, generator=g), greedy(counting_model, prompt, 5)
    )
    a = sample(
        counting_model, prompt, 8, temperature=5.0, generator=torch.Generator().manual_seed(7)
    )
    b = sample(
        counting_model, prompt, 8, temperature=5.0, generator=torch.Generator().manual_seed(7)
    )
    assert torch.equal(a, b)


def test_eos_stops_generation(counting_model):
    out = sample(counting_model, torch.tensor([[2, 3]]), 10, temperature=0.0, eos_id=6)
    assert out.tolist() == [[2, 3, 4, 5, 6]]


def test_filter_logits_top_k_and_top_p():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    assert torch.isfinite(filter_logits(logits, top_k=2)).tolist() == [[True, True, False, False]]
    # Nucleus 0.7: 0.5 alone is short of it, 0.5 + 0.3 reaches it.
    assert torch.isfinite(filter_logits(logits, top_p=0.7)).tolist() == [[True, True, False, False]]
    assert torch.isfinite(filter_logits(logits, top_p=0.4)).tolist() == [
        [True, False, False, False]
    ]
    assert torch.isfinite(filter_logits(logits, top_p=1.0)).all()


def test_beam_search_finds_the_most_likely_sequence(counting_model):
    seq, score = beam_search(counting_model, torch.tensor([4, 5]), 4, beam_width=3)
    assert seq.tolist() == [4, 5, 6, 7, 8, 9]
    assert score <= 0


def test_beam_search_length_penalty_and_eos(counting_model):
    # eos = 8: the best hypothesis ends at it; later tokens are never appended.
    seq, _ = beam_search(counting_model, torch.tensor([5]), 10, beam_width=2, eos_id=8)
    assert seq.tolist() == [5, 6, 7, 8]
    with pytest.raises(ValueError, match="beam_width"):
        beam_search(counting_model, torch.tensor([5]), 3, beam_width=0)


def test_flops_of_the_125m_config_match_a_hand_count():
    from pathlib import Path

    from trainer.config import load_config

    toml = Path(__file__).resolve().parents[2] / "trainer" / "configs" / "gpt125m.toml"
    cfg = load_config(toml, ["--model.vocab_size", "50304"])
    with torch.device("meta"):  # shapes only: no 0.5 GB of weights
        model = Transformer(cfg.model)
    d, L, V, T, ffn = 768, 12, 50304, 1024, 2048  # ffn: 8/3 * 768 = 2048, a multiple of 256
    per_layer = 4 * d * d + 3 * d * ffn + 2 * d  # wq wk wv wo, w1 w2 w3, two RMSNorm weights
    n = L * per_layer + d + V * d  # + final norm + the tied embedding (it is the output matmul)
    assert model.num_params() == n == 123_587_328
    assert model.flops_per_token(T) == 6 * n + 12 * L * d * T  # H * Q = d


# --------------------------------------------------------------------------- old checkpoints

UNFUSED = Path(__file__).resolve().parents[1] / "assets" / "model_unfused_v1.pt"


def test_a_checkpoint_from_before_the_fused_projections_loads_and_trains_on_the_same():
    """tests/assets/model_unfused_v1.pt was written by the model with separate wq/wk/wv and
    w1/w3 (commit 6a7c600): its seed-0 initial weights, its weights and AdamW state after two
    steps, the logits they give, and the loss after one more step on a recorded batch."""
    old = torch.load(UNFUSED, weights_only=False)
    cfg = ModelConfig(**old["config"])

    torch.manual_seed(0)
    model = Transformer(cfg)  # same seed, same weights: the fused matrices are drawn blockwise
    fresh = model.state_dict()
    model.load_state_dict(old["init_model"])
    for k, v in model.state_dict().items():
        assert torch.equal(v, fresh[k]), k

    model.load_state_dict(old["model"])
    assert "layers.0.attention.wqkv.weight" in model.state_dict()
    b = old["batch"]
    with torch.no_grad():
        torch.testing.assert_close(model(b[:, :-1]), old["logits"], rtol=0, atol=1e-6)

    named = list(model.named_parameters())
    groups = [[n for n, p in named if p.dim() >= 2], [n for n, p in named if p.dim() < 2]]
    opt = torch.optim.AdamW(
        [
            {"params": [p for n, p in named if p.dim() >= 2], "weight_decay": 0.1},
            {"params": [p for n, p in named if p.dim() < 2], "weight_decay": 0.0},
        ],
        lr=1e-2,
    )
    sizes = {k: v.size(0) for k, v in old["model"].items()}
    opt.load_state_dict(legacy.fuse_optimizer_state(old["optimizer"], groups, sizes))
    model(b[:, :-1], b[:, 1:]).backward()
    opt.step()
    with torch.no_grad():
        torch.testing.assert_close(
            model(b[:, :-1], b[:, 1:]), old["loss_after_step"], rtol=0, atol=1e-6
        )


def test_a_partial_old_key_group_is_reported_by_name_not_guessed():
    old = torch.load(UNFUSED, weights_only=False)
    state = dict(old["model"])
    del state["layers.0.attention.wk.weight"]
    model = Transformer(ModelConfig(**old["config"]))
    with pytest.raises(RuntimeError, match=r"layers\.0\.attention\.wqkv\.weight"):
        model.load_state_dict(state)


def test_optimizer_state_of_another_model_is_refused():
    old = torch.load(UNFUSED, weights_only=False)
    with pytest.raises(ValueError, match="not a checkpoint of this model"):
        legacy.fuse_optimizer_state(old["optimizer"], [["a.weight"], ["b.weight"]], {})
