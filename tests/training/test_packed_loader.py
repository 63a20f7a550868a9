"""MixedLoader over packed SFT sources: batches carry segment_ids and position_ids (None otherwise), both
modes read packed rows (every row once per epoch), resume exactly, refuse packed + padded, pass
ignore_index through."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from niels_gpt.cache.build_cache import build_sft_cache
from niels_gpt.cache.loader import MixedLoader
from niels_gpt.cache.sft_dataset import SFTExampleDataset
from niels_gpt.sampling import derive_seed, draw_sources
from tests.support.chats import random_chats

SFT_P = {"dolly15k": 0.3, "oasst1": 0.7}
T, B = 32, 8


@pytest.fixture(scope="module")
def cache_dir(tiny_tokenizer, tmp_path_factory):
    root = tmp_path_factory.mktemp("packed_loader")
    for k, name in enumerate(SFT_P):
        chats = random_chats(60 + 20 * k, seed=k, max_words=12)
        build_sft_cache(chats, str(root / "sft" / name), tokenizer=tiny_tokenizer, val_frac=0.1, seed=0, source=name)
    return root


def packed(cache_dir, **kw):
    return MixedLoader.sft(cache_dir, p=SFT_P, T=T, B=B, seed=4, packing=True, **kw)


def datasets(cache_dir, **kw) -> dict[str, SFTExampleDataset]:
    return {n: SFTExampleDataset.from_cache_dir(cache_dir / "sft" / n, T=T, seed=4, **kw) for n in sorted(SFT_P)}


FIELDS = ("x", "y", "y_masked", "segment_ids", "position_ids")


def test_random_batches_are_the_packed_rows_each_source_draws(cache_dir):
    batch = packed(cache_dir).batch_at(2)
    g = torch.Generator().manual_seed(derive_seed(4, 2, 0))
    names, src = draw_sources(SFT_P, B, g)
    assert torch.equal(batch.source, src)
    for k, (name, ds) in enumerate(datasets(cache_dir, packing=True).items()):
        rows = (src == k).nonzero().squeeze(1)
        for field, want in zip(FIELDS, ds.get_batch(B=len(rows), generator=g)):
            assert torch.equal(getattr(batch, field)[rows], want), (name, field)
    assert batch.segment_ids.dtype == torch.int32 and batch.position_ids.dtype == torch.int64
    assert (batch.segment_ids.max(1).values > 1).any()  # rows hold several examples
    unpacked = MixedLoader.sft(cache_dir, p=SFT_P, T=T, B=B, seed=4).batch_at(2)
    assert unpacked.y_masked is not None and unpacked.segment_ids is None and unpacked.position_ids is None


def test_epoch_mode_reads_every_packed_row_once_per_epoch(cache_dir):
    loader = packed(cache_dir, mode="epoch")
    batches = [next(loader) for _ in range(60)]
    for k, (name, ds) in enumerate(datasets(cache_dir, packing=True).items()):
        rows = torch.cat(
            [torch.cat([getattr(b, f)[b.source == k].long() for f in FIELDS], 1) for b in batches]
        ).tolist()
        n = len(ds)
        want = np.concatenate([a.astype(np.int64) for a in ds.rows(np.arange(n))], 1).tolist()
        assert len(rows) >= 2 * n and sorted(rows[:n]) == sorted(want) == sorted(rows[n : 2 * n]), name
    assert batches[-1].epochs["dolly15k"] >= 2


@pytest.mark.parametrize("mode", ["random", "epoch"])
def test_a_resumed_packed_loader_continues_with_the_same_batches(cache_dir, mode):
    straight = packed(cache_dir, mode=mode)
    expected = [next(straight) for _ in range(9)][5:]
    saver = packed(cache_dir, mode=mode)
    for _ in range(5):
        next(saver)
    resumed = packed(cache_dir, mode=mode)
    resumed.load_state_dict(json.loads(json.dumps(saver.state_dict())))
    for want in expected:
        got = next(resumed)
        assert got.step == want.step and all(torch.equal(getattr(got, f), getattr(want, f)) for f in FIELDS)
    padded = MixedLoader.sft(cache_dir, p=SFT_P, T=T, B=B, seed=4, mode=mode)
    with pytest.raises(ValueError, match=r"refusing to resume.*caches\['dolly15k'\]"):
        padded.load_state_dict(saver.state_dict())  # a packed position means nothing to padded rows


def test_packed_and_padded_sources_are_refused_in_one_loader(cache_dir):
    sources = {"dolly15k": datasets(cache_dir)["dolly15k"], "oasst1": datasets(cache_dir, packing=True)["oasst1"]}
    with pytest.raises(ValueError) as e:
        MixedLoader(sources, p=SFT_P, B=B, seed=0)
    assert str(e.value) == (
        "packed and padded SFT sources cannot be mixed in one loader ({'dolly15k': '(x, y, y_masked)', 'oasst1': "
        "'packed (x, y, y_masked, segment_ids, position_ids)'}): a batch is either packed rows with segment_ids "
        "and position_ids or one example per row; open every SFT source with packing=True "
        "(MixedLoader.sft(..., packing=True)) or none"
    )


@pytest.mark.parametrize("packing", [False, True])
def test_ignore_index_reaches_every_row(cache_dir, packing):
    loader = MixedLoader.sft(cache_dir, p=SFT_P, T=T, B=64, seed=1, packing=packing, ignore_index=-1)
    batch = next(loader)
    default = MixedLoader.sft(cache_dir, p=SFT_P, T=T, B=64, seed=1, packing=packing).batch_at(0)
    assert loader.ignore_index == -1 and torch.equal(
        batch.y_masked, default.y_masked.masked_fill(default.y_masked == -100, -1)
    )
    assert ((batch.y_masked != -1).sum(1) > 0).all()
    mixed = datasets(cache_dir)
    mixed["oasst1"] = SFTExampleDataset.from_cache_dir(cache_dir / "sft" / "oasst1", T=T, ignore_index=-1)
    with pytest.raises(ValueError, match=r"one ignore_index, got \{'dolly15k': -100, 'oasst1': -1\}"):
        MixedLoader(mixed, p=SFT_P, B=B, seed=0)
