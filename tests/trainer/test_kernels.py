"""Kernel choice: a kernel asked for that cannot run is an error naming why, `auto` says once
what it picked, and the loss is float32 whatever the logits' dtype. Real torch on CPU; the
parity of the CUDA kernels is in tests/trainer/test_cuda.py (marker ``cuda``)."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from trainer import kernels
from trainer.config import ConfigError, load_config
from trainer.model import ModelConfig, Transformer
from trainer.train import main as train_main

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _fresh_kernel_choice(monkeypatch):
    monkeypatch.delenv(kernels.ENV_ATTN, raising=False)
    monkeypatch.delenv(kernels.ENV_KERNELS, raising=False)
    kernels.clear_cache()
    yield
    kernels.clear_cache()


def tiny() -> Transformer:
    torch.manual_seed(0)
    return Transformer(
        ModelConfig(vocab_size=97, dim=32, n_layers=2, n_heads=4, n_kv_heads=2, max_seq_len=16)
    )


# --------------------------------------------------------------------------- asked for, cannot run


def test_flash_in_fp32_is_refused_with_the_reason_even_on_cuda():
    # The dtype check comes before any probe, so it holds on a CPU machine too.
    with pytest.raises(RuntimeError, match=r"'flash' was requested.*no float32 kernel"):
        kernels.select("cuda", attention="flash", dtype=torch.float32)
    with pytest.raises(RuntimeError, match="no float32 kernel"):
        kernels.select("cuda", attention="flash")  # no dtype: float32


def test_flash_called_directly_on_fp32_raises_instead_of_running_another_kernel():
    q = torch.zeros(1, 4, 2, 8)
    with pytest.raises(RuntimeError, match="needs bf16 or fp16"):
        kernels.attention_flash(q, q, q)


def test_xformers_without_cuda_is_refused():
    with pytest.raises(RuntimeError, match=r"'xformers' was requested.*runs on CUDA only"):
        kernels.select("cpu", attention="xformers", dtype=torch.bfloat16)


def test_any_kind_can_be_forced_and_a_cuda_only_one_is_refused_on_cpu(monkeypatch):
    monkeypatch.setenv(kernels.ENV_KERNELS, "rms_norm=eager, attention=naive")
    ks = kernels.select("cpu")
    assert (ks.rms_norm_name, ks.attention_name) == ("eager", "naive")
    with pytest.raises(RuntimeError, match=r"cross_entropy kernel 'liger'.*CUDA only"):
        kernels.select("cpu", overrides={"cross_entropy": "liger"})
    monkeypatch.setenv(kernels.ENV_KERNELS, "cross_entropy=fast")
    with pytest.raises(ValueError, match=r"\$TRAINER_KERNELS: 'cross_entropy=fast'"):
        kernels.select("cpu")


def test_without_cuda_a_forced_cuda_kernel_says_cuda_is_missing(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match=r"torch\.cuda\.is_available\(\) is False"):
        kernels.select("cuda", overrides={"cross_entropy": "liger"})


def test_config_refuses_flash_with_fp32_and_cuda_kernels_on_cpu():
    with pytest.raises(ConfigError, match=r"--model.attention='flash': flash-attn has no fp32"):
        load_config(
            None,
            ["--data.source", "synthetic", "--train.dtype", "fp32", "--model.attention", "flash"],
        )
    with pytest.raises(ConfigError, match=r"--model.attention='xformers': runs on CUDA only"):
        load_config(
            None,
            [
                "--data.source",
                "synthetic",
                "--train.device",
                "cpu",
                "--model.attention",
                "xformers",
            ],
        )


def test_the_trainer_stops_before_step_0_when_a_forced_kernel_cannot_run(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(kernels.ENV_KERNELS, "cross_entropy=liger")
    code = train_main(
        [
            "--config",
            str(REPO / "trainer/configs/debug.toml"),
            "--no-log",
            "--train.device",
            "cpu",
            "--train.ckpt_dir",
            str(tmp_path / "ckpt"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "$TRAINER_ATTN/$TRAINER_KERNELS: cross_entropy kernel 'liger'" in err
    assert not (tmp_path / "ckpt").exists()


# --------------------------------------------------------------------------- auto says once


def test_auto_says_once_what_it_picked(caplog):
    with caplog.at_level(logging.INFO, logger="trainer.kernels"):
        kernels.select("cpu")
        kernels.select("cpu")
    lines = [r for r in caplog.records if r.name == "trainer.kernels"]
    assert len(lines) == 1
    assert lines[0].levelno == logging.INFO
    assert "kernels for cpu/float32: attention sdpa" in lines[0].getMessage()


def test_auto_on_cuda_without_the_fast_kernels_warns_with_each_reason(monkeypatch, caplog):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with caplog.at_level(logging.INFO, logger="trainer.kernels"):
        ks = kernels.select("cuda", dtype=torch.bfloat16)
        kernels.select("cuda", dtype=torch.bfloat16)
    assert ks.attention_name == "sdpa"
    (rec,) = [r for r in caplog.records if r.name == "trainer.kernels"]
    assert rec.levelno == logging.WARNING
    text = rec.getMessage()
    assert "attention sdpa (not flash: needs CUDA" in text
    assert "not xformers: needs CUDA" in text
    assert "cross_entropy eager" in text and "not liger" not in text  # liger: forced only


def test_auto_in_fp32_on_cuda_passes_over_flash_for_its_dtype(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    ks = kernels.select("cuda", dtype=torch.float32)
    assert ("attention", "flash") in {(k, n) for k, n, _ in ks.skipped}
    reason = next(r for k, n, r in ks.skipped if n == "flash")
    assert "no float32 kernel" in reason


def test_the_model_chooses_again_when_autocast_changes_its_dtype():
    model = tiny()
    idx = torch.randint(0, 97, (1, 8))
    model(idx)
    assert model.kernels is not None and model.kernels.dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        model(idx)
    assert model.kernels.dtype == torch.bfloat16


# --------------------------------------------------------------------------- float32 loss


def test_cross_entropy_of_bf16_logits_is_computed_in_float32():
    torch.manual_seed(0)
    # A large vocabulary and confident logits: where bf16 arithmetic loses the most.
    logits = (torch.randn(64, 4096) * 8).to(torch.bfloat16)
    targets = torch.randint(0, 4096, (64,))
    targets[:4] = -100
    loss = kernels.cross_entropy_eager(logits, targets)
    assert loss.dtype == torch.float32
    exact = F.cross_entropy(logits.double(), targets, ignore_index=-100)
    assert abs(loss.double().item() - exact.item()) < 1e-5 * exact.item()
    # The same loss in bf16 is off by far more than that: the check can tell the two apart.
    in_bf16 = F.cross_entropy(logits, targets, ignore_index=-100)
    assert in_bf16.dtype == torch.bfloat16
    assert abs(in_bf16.double().item() - exact.item()) > 1e-4 * exact.item()


def test_the_models_loss_under_bf16_autocast_is_float32_and_matches_its_logits():
    model = tiny()
    idx, targets = torch.randint(0, 97, (2, 16)), torch.randint(0, 97, (2, 16))
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(idx)
        loss = model(idx, targets)
    assert logits.dtype == torch.bfloat16
    assert loss.dtype == torch.float32
    exact = F.cross_entropy(logits.double().view(-1, 97), targets.view(-1))
    assert math.isclose(loss.item(), exact.item(), rel_tol=1e-6)


def test_auto_never_picks_liger_cross_entropy_which_syncs_the_host():
    # On an H200 the trainer's 30 steps under set_sync_debug_mode("error") raised in liger's
    # forward (target_mask.sum().item()): auto leaves it to those who force it.
    assert kernels._auto("cross_entropy", "cuda") == ("eager",)
    assert ("cross_entropy", "liger") in kernels.NOT_AUTO


def test_xformers_swiglu_counts_only_with_a_fused_op():
    # xformers 0.0.35 (real, on the CPU: the dispatcher is the same code on a GPU) sends swiglu
    # to its own eager op, two matmuls where ours does one: the probe must not call it faster.
    import xformers.ops  # noqa: F401  (the dev extra installs it)

    x, w = torch.randn(4, 64), torch.randn(128, 64)
    reason = kernels.xformers_swiglu_unfused(x, w, w.t().contiguous())
    assert "no fused op" in reason
