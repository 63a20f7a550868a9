"""Random-window sampling of PretrainTokenStreamDataset: y is x shifted, ids in vocab, every window equally likely."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from niels_gpt.cache.pretrain_dataset import PretrainTokenStreamDataset
from niels_gpt.pretrain.writer import build_pretrain_cache_presplit
from tests.support.corpus import tiny_corpus

T = 10


def write_shards(split_dir, lengths, offset=0):
    """Shards whose token values are their global position + offset: a value tells where it came from."""
    split_dir.mkdir(parents=True)
    start = offset
    for i, n in enumerate(lengths):
        np.arange(start, start + n, dtype="<u2").tofile(split_dir / f"shard_{i:05d}.bin")
        start += n
    return split_dir


@pytest.fixture
def unequal(tmp_path):
    # valid starts: 990 and 290; the 8-token shard is too short for T+1 = 11 and is never used
    return write_shards(tmp_path / "train", [1000, 300, 8])


def test_y_is_x_shifted_and_ids_are_in_vocab(tmp_path, tiny_tokenizer):
    build_pretrain_cache_presplit(
        tiny_corpus(60),
        tiny_corpus(5, seed=1),
        str(tmp_path),
        tokenizer=tiny_tokenizer,
        max_train_tokens=None,
        max_val_tokens=None,
        shard_bytes=300,
        seed=0,
    )
    ds = PretrainTokenStreamDataset(tmp_path / "train", T=32, device="cpu", tokenizer=tiny_tokenizer)
    g = torch.Generator().manual_seed(0)
    for B in (1, 7, 32):
        x, y = ds.get_batch(B=B, generator=g)
        assert x.shape == y.shape == (B, 32) and x.dtype == y.dtype == torch.int64 and x.device.type == "cpu"
        assert torch.equal(y[:, :-1], x[:, 1:])
        assert int(x.min()) >= 0 and int(torch.maximum(x, y).max()) < tiny_tokenizer.vocab_size
        assert x.is_contiguous() and y.is_contiguous()


def test_windows_are_contiguous_slices_of_one_shard(unequal):
    ds = PretrainTokenStreamDataset(unequal, T=T, device="cpu")
    x, y = ds.get_batch(B=256, generator=torch.Generator().manual_seed(1))
    assert torch.equal(x, x[:, :1] + torch.arange(T)) and torch.equal(y, x + 1)
    first, last = x[:, 0], y[:, -1]
    in_shard0 = last < 1000
    assert torch.all((first >= 1000) | in_shard0)  # no window crosses from shard 0 into shard 1
    assert torch.all(last < 1300)  # the too-short third shard is never sampled


def test_equal_generators_give_equal_batches(unequal):
    ds = PretrainTokenStreamDataset(unequal, T=T)
    a = ds.get_batch(B=16, generator=torch.Generator().manual_seed(5))
    b = PretrainTokenStreamDataset(unequal, T=T).get_batch(B=16, generator=torch.Generator().manual_seed(5))
    c = ds.get_batch(B=16, generator=torch.Generator().manual_seed(6))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) and not torch.equal(a[0], c[0])


def test_draw_order_is_the_documented_one(unequal):
    ds = PretrainTokenStreamDataset(unequal, T=T)
    x, _ = ds.get_batch(B=8, generator=torch.Generator().manual_seed(9))
    g = torch.Generator().manual_seed(9)
    window = torch.randint(0, 990 + 290, (8,), generator=g)  # one number per window start, shard 0 first
    in_second = window >= 990
    expected_first_token = torch.where(in_second, 1000 + (window - 990), window)
    assert torch.equal(x[:, 0], expected_first_token)


def test_shards_are_chosen_in_proportion_to_their_valid_starts(unequal):
    ds = PretrainTokenStreamDataset(unequal, T=T)
    g = torch.Generator().manual_seed(2)
    first = torch.cat([ds.get_batch(B=512, generator=g)[0][:, 0] for _ in range(20)])
    share0 = (first < 1000).double().mean().item()
    assert abs(share0 - 990 / 1280) < 0.02  # ~5 standard deviations over 10,240 rows; uniform choice gives 0.5
    starts0 = first[first < 1000].double()
    assert abs(starts0.mean().item() - 989 / 2) < 15 and starts0.min() < 10 and starts0.max() > 980


def test_too_short_for_T_names_T_and_the_longest_shard(tmp_path):
    d = write_shards(tmp_path / "train", [5, 9])
    with pytest.raises(ValueError, match=r"T\+1 = 11 .*shard_00001.bin.*has 9"):
        PretrainTokenStreamDataset(d, T=10)


def test_missing_or_temporary_only_shards_are_refused(tmp_path):
    d = tmp_path / "train"
    d.mkdir()
    np.arange(100, dtype="<u2").tofile(d / "shard_00000.bin.tmp")
    with pytest.raises(FileNotFoundError, match="no shard_"):
        PretrainTokenStreamDataset(d, T=4)
    with pytest.raises(NotADirectoryError, match=rf"^{tmp_path / 'nope'}: no such shard directory; build the cache"):
        PretrainTokenStreamDataset(tmp_path / "nope", T=4)
