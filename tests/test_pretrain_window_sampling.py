"""Pretrain window sampling: `y[:, :-1] == x[:, 1:]` always, ids are within the vocabulary, and every
window start is equally likely (a shard is picked in proportion to its length, not uniformly)."""

from __future__ import annotations

import torch

from niels_gpt.cache.build_cache import build_pretrain_cache_presplit
from niels_gpt.cache.pretrain_dataset import PretrainTokenStreamDataset
from tests.support.cache_files import numbered_shards
from tests.support.corpus import tiny_corpus

T = 10


def test_y_is_x_shifted_and_ids_are_in_vocab(tmp_path, tiny_tokenizer):
    build_pretrain_cache_presplit(
        tiny_corpus(60),
        tiny_corpus(5, seed=1),
        str(tmp_path),
        tokenizer=tiny_tokenizer,
        max_train_tokens=None,
        max_val_tokens=None,
        shard_bytes=300,  # many shards
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


def test_shards_are_chosen_in_proportion_to_their_valid_starts(tmp_path):
    # token values are positions: 0..999 in shard 0, 1000..1299 in shard 1, and an 8-token shard too short
    # for T+1 = 11; valid window starts: 990 and 290
    ds = PretrainTokenStreamDataset(numbered_shards(tmp_path / "train", [1000, 300, 8]), T=T)
    g = torch.Generator().manual_seed(2)
    first = torch.cat([ds.get_batch(B=512, generator=g)[0][:, 0] for _ in range(20)])
    share0 = (first < 1000).double().mean().item()
    assert abs(share0 - 990 / 1280) < 0.02  # ~5 standard deviations over 10,240 rows; uniform choice gives 0.5
    starts0 = first[first < 1000].double()
    assert abs(starts0.mean().item() - 989 / 2) < 15 and starts0.min() < 10 and starts0.max() > 980
    assert int(first.max()) < 1300 - T  # never from the too-short shard, never past a shard's last window
