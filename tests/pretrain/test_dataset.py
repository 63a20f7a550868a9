"""PretrainTokenStreamDataset (pretrain/dataset.py): windows within one shard, the documented draw, memmaps,
the guards against a damaged, stale or unbuilt cache. (The sampling invariants are tested in
tests/test_pretrain_window_sampling.py.)"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from niels_gpt.pretrain.dataset import PretrainTokenStreamDataset
from niels_gpt.pretrain.writer import build_pretrain_cache
from niels_gpt.token_files import list_shards
from tests.support.cache_files import numbered_shards
from tests.support.corpus import tiny_corpus

T = 10


@pytest.fixture
def unequal(tmp_path):
    # valid starts: 990 and 290; the 8-token shard is too short for T+1 = 11 and is never used
    return numbered_shards(tmp_path / "train", [1000, 300, 8])


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


def test_too_short_for_T_names_T_and_the_longest_shard(tmp_path):
    d = numbered_shards(tmp_path / "train", [5, 9])
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


def build(texts, out, tok):
    return build_pretrain_cache(
        texts, str(out), tokenizer=tok, max_train_tokens=None, max_val_tokens=None, shard_bytes=512, seed=7,
        shuffle_buffer=None, val_doc_prob=0.3,
    )  # fmt: skip


def test_dataset_reads_the_cache_through_memmaps_and_checks_the_tokenizer(tmp_path, tiny_tokenizer):
    build(tiny_corpus(60, seed=14), tmp_path, tiny_tokenizer)
    ds = PretrainTokenStreamDataset(tmp_path / "train", T=16, device="cpu", tokenizer=tiny_tokenizer)
    assert ds.maps and all(isinstance(m, np.memmap) and m.mode == "r" for m in ds.maps)
    assert all(np.shares_memory(w, ds.maps[i]) for w, i in zip(ds._windows, ds.usable_shards))  # views, no copies
    x, y = ds.get_batch(B=4, generator=torch.Generator().manual_seed(0))
    assert x.shape == (4, 16) and int(x.max()) < tiny_tokenizer.vocab_size

    class OtherTokenizer:
        sha256 = "0" * 64
        model_path = "other/spm.model"

    with pytest.raises(ValueError) as e:
        PretrainTokenStreamDataset(tmp_path / "train", T=16, device="cpu", tokenizer=OtherTokenizer())
    msg = str(e.value)
    assert tiny_tokenizer.sha256 in msg and "0" * 64 in msg and str(tmp_path) in msg and "rebuild" in msg


def test_dataset_refuses_shards_that_do_not_match_meta(tmp_path, tiny_tokenizer):
    build(tiny_corpus(60, seed=15), tmp_path, tiny_tokenizer)
    next(iter(list_shards(tmp_path / "train"))).unlink()
    with pytest.raises(ValueError, match="do not match"):
        PretrainTokenStreamDataset(tmp_path / "train", T=8)
