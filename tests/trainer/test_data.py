"""ShardLoader on real memory-mapped shards: packing, rank striding, exact resume, clean close."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest
import torch

from trainer.data import ShardLoader
from trainer.parts import Batches, RankPart
from trainer.prepare import ShardWriter


def make_shards(path, n_tokens: int, shard_tokens: int, dtype=np.uint32, valid_tokens: int = 0):
    """Shards whose token at stream position p is p itself, so positions can be checked."""
    path.mkdir(parents=True, exist_ok=True)
    splits = {}
    for split, n in (("train", n_tokens), ("valid", valid_tokens)):
        w = ShardWriter(path, split, np.dtype(dtype), shard_tokens)
        # Uneven pieces so documents straddle shard boundaries.
        for lo in range(0, n, 37):
            w.add(range(lo, min(n, lo + 37)))
        splits[split] = w.close()
    manifest = {"dtype": np.dtype(dtype).name, "vocab_size": 1 << 20, "splits": splits}
    (path / "manifest.json").write_text(json.dumps(manifest))
    return path


@pytest.fixture
def shards(tmp_path):
    return make_shards(tmp_path / "data", n_tokens=10_000, shard_tokens=1_000, valid_tokens=300)


def take(loader, n):
    return [next(loader) for _ in range(n)]


def loader_threads():
    return [t for t in threading.enumerate() if t.name.startswith("ShardLoader")]


def test_batches_are_packed_shifted_int64(shards):
    with ShardLoader(shards, Batches(4, 16)) as loader:
        x, y = next(loader)
        assert x.shape == y.shape == (4, 16)
        assert x.dtype == y.dtype == torch.int64
        assert x.is_contiguous() and y.is_contiguous()
        # Token value == stream position: each row is a contiguous window, y is x shifted by one.
        assert torch.equal(y, x + 1)
        assert torch.equal(x[:, 1:], x[:, :1] + torch.arange(1, 16))
        assert bool((x[:, 0] % 16 == 0).all())
        assert loader.tokens_per_batch == 64


def test_every_token_is_an_input_once_per_epoch_across_ranks(shards):
    # 10_000 tokens, T=16 -> 624 sequences; 3 ranks x 4 -> 52 steps, none left over.
    world, B, T = 3, 4, 16
    loaders = [
        ShardLoader(shards, Batches(B, T, seed=5, part=RankPart(r, world)), prefetch=r)  # 0, 1, 2
        for r in range(world)
    ]
    steps = loaders[0].steps_per_epoch
    assert steps == (9_999 // T) // (world * B) == 52
    seen = []
    for loader in loaders:
        seen.append(torch.cat([x.flatten() for x, _ in take(loader, steps)]))
        loader.close()
    tokens = torch.cat(seen)
    assert len(tokens) == steps * world * B * T
    assert torch.equal(tokens.sort().values, torch.arange(len(tokens)))  # each exactly once
    for a in range(world):
        for b in range(a + 1, world):
            assert not set(seen[a].tolist()) & set(seen[b].tolist())


def test_order_is_deterministic_per_seed_and_differs_between_epochs(shards):
    def first_tokens(seed, n):
        with ShardLoader(shards, Batches(2, 8, seed=seed)) as loader:
            return [x[:, 0].tolist() for x, _ in take(loader, n)]

    steps = ShardLoader(shards, Batches(2, 8)).steps_per_epoch
    a, b, c = first_tokens(1, steps + 3), first_tokens(1, steps + 3), first_tokens(2, 3)
    assert a == b
    assert a[:3] != c
    assert a[steps : steps + 3] != a[:3]  # epoch 1 is a new permutation


def test_resume_gives_the_same_next_batches(shards):
    B, T, k, n = 3, 32, 7, 12
    with ShardLoader(shards, Batches(B, T, seed=3)) as reference:
        expected = take(reference, k + n)

    with ShardLoader(shards, Batches(B, T, seed=3), prefetch=2) as first:
        got = take(first, k)
        state = first.state_dict()  # prefetched batches beyond k must not count
    assert state["step"] == k
    state = json.loads(json.dumps(state))  # survives a checkpoint round trip

    with ShardLoader(shards, Batches(B, T, seed=3)) as resumed:
        resumed.load_state_dict(state)
        got += take(resumed, n)
    for (xe, ye), (xg, yg) in zip(expected, got, strict=True):
        assert torch.equal(xe, xg) and torch.equal(ye, yg)


def test_resume_across_an_epoch_boundary(shards):
    with ShardLoader(shards, Batches(8, 64, seed=0)) as loader:
        steps = loader.steps_per_epoch
        expected = take(loader, steps + 4)
    with ShardLoader(shards, Batches(8, 64, seed=0)) as loader:
        take(loader, steps - 1)
        state = loader.state_dict()
    with ShardLoader(shards, Batches(8, 64, seed=0)) as loader:
        loader.load_state_dict(state)
        rest = take(loader, 5)
        assert loader.epoch == 1
    assert all(torch.equal(a[0], b[0]) for a, b in zip(expected[steps - 1 :], rest, strict=True))


def test_load_state_dict_refuses_other_data_or_settings(shards, tmp_path):
    with ShardLoader(shards, Batches(2, 16)) as loader:
        state = loader.state_dict()
    with ShardLoader(shards, Batches(2, 32)) as other, pytest.raises(ValueError, match="seq_len"):
        other.load_state_dict(state)
    with (
        ShardLoader(shards, Batches(2, 16, seed=9)) as other,
        pytest.raises(ValueError, match="seed"),
    ):
        other.load_state_dict(state)
    smaller = make_shards(tmp_path / "small", n_tokens=5_000, shard_tokens=700)
    with (
        ShardLoader(smaller, Batches(2, 16)) as other,
        pytest.raises(ValueError, match="num_sequences"),
    ):
        other.load_state_dict(state)


def test_validation_split_in_order_for_one_epoch(shards):
    with ShardLoader(shards, Batches(2, 16, split="valid"), shuffle=False, loop=False) as loader:
        batches = list(loader)
        assert len(batches) == loader.steps_per_epoch == 299 // 16 // 2
        with pytest.raises(StopIteration):
            next(loader)
    firsts = [int(x[0, 0]) for x, _ in batches]
    assert firsts == [i * 32 for i in range(len(batches))]


def test_close_leaves_no_thread_behind(shards):
    before = len(loader_threads())
    loader = ShardLoader(shards, Batches(2, 16), prefetch=2)
    take(loader, 3)  # the producer is now blocked on a full queue
    assert len(loader_threads()) == before + 1
    loader.close()
    assert len(loader_threads()) == before
    loader.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        next(loader)


def test_close_before_first_batch_and_after_load_state(shards):
    loader = ShardLoader(shards, Batches(2, 16))
    loader.close()
    loader = ShardLoader(shards, Batches(2, 16))
    take(loader, 1)
    loader.load_state_dict(loader.state_dict())  # restarts the producer lazily
    assert len(loader_threads()) == 0
    take(loader, 1)
    loader.close()
    assert len(loader_threads()) == 0


def test_too_little_data_and_missing_manifest_are_clear_errors(shards, tmp_path):
    with pytest.raises(ValueError, match="needs at least"):
        ShardLoader(shards, Batches(64, 256, split="valid"))
    with pytest.raises(ValueError, match="split 'test'"):
        ShardLoader(shards, Batches(2, 16, split="test"))
    with pytest.raises(FileNotFoundError, match=r"trainer\.prepare"):
        ShardLoader(tmp_path / "nowhere", Batches(2, 16))
    (shards / "train_00003.bin").write_bytes(b"\x00" * 12)  # truncated shard
    with pytest.raises(ValueError, match=r"train_00003\.bin"):
        ShardLoader(shards, Batches(2, 16))


def test_uint16_shards(tmp_path):
    path = make_shards(tmp_path / "u16", n_tokens=3_000, shard_tokens=512, dtype=np.uint16)
    with ShardLoader(path, Batches(2, 10, seed=1)) as loader:
        x, y = next(loader)
    assert torch.equal(y, x + 1) and int(x.max()) < 3_000


def test_resume_with_a_different_world_size_converts_the_position(shards):
    with ShardLoader(shards, Batches(2, 16, part=RankPart(0, 2))) as loader:
        take(loader, 10)  # 10 steps x 2 ranks x 2 sequences = 40 sequences consumed
        state = loader.state_dict()
    with ShardLoader(shards, Batches(8, 16)) as loader:
        with pytest.warns(UserWarning, match="approximate"):
            loader.load_state_dict(state)
        assert loader.state_dict()["step"] == 5 and loader.epoch == 0
