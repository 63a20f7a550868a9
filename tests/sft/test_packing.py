"""Packed SFT rows: best-fit decreasing equals the example-by-example rule; reading a cache packed gives
every example its own render_chat_sft targets, ignores the crossing and padding targets, numbers the
examples and restarts their positions; the cache on disk is untouched."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch

from niels_gpt.cache.sft_dataset import SFTExampleDataset
from niels_gpt.sft.packing import _placement_order, pack_examples
from niels_gpt.sft.writer import build_sft_cache
from tests.sft.test_dataset import CHATS, expected_rows, kept_positions


def reference_bfd(lengths, width: int, seed: int) -> list[list[int]]:
    """Example by example, in the packing's placement order: into the row with the least room that fits
    it (ties: the most recently filled row), else a new row. Returns each row's examples in order."""
    rows, room, stamp = [], [], []
    for clock, i in enumerate(_placement_order(np.asarray(lengths), seed).tolist()):
        fits = [r for r in range(len(rows)) if room[r] >= lengths[i]]
        if fits:
            r = min(fits, key=lambda r: (room[r], -stamp[r]))
        else:
            r = len(rows)
            rows.append([])
            room.append(width)
            stamp.append(0)
        rows[r].append(i)
        room[r] -= lengths[i]
        stamp[r] = clock
    return rows


def packed_rows(packed) -> list[list[int]]:
    return [packed.examples[a:b].tolist() for a, b in zip(packed.start[:-1], packed.start[1:])]


@pytest.mark.parametrize("width", [2, 7, 33, 257])
def test_best_fit_decreasing_equals_the_example_by_example_rule(width):
    rng = np.random.default_rng(width)
    for trial in range(30):
        n = int(rng.integers(0, 120))
        if trial % 3 == 0:  # few distinct lengths: many ties between examples and between rows
            lengths = rng.choice([1, width // 3 + 1, width // 2 + 1, width], n)
        else:
            lengths = np.minimum(rng.geometric(min(3 / width, 1.0), n), width)
        packed = pack_examples(lengths, width, seed=trial)
        assert packed_rows(packed) == reference_bfd(lengths, width, trial), (width, trial)
        used = packed.used(lengths)
        assert (used <= width).all() and sorted(packed.examples.tolist()) == list(range(n))
        ends = packed.offsets + lengths[packed.examples]
        first = packed.start[:-1][np.diff(packed.start) > 0]
        assert (packed.offsets[first] == 0).all()  # each row starts at slot 0, examples back to back
        follows = np.ones(n, dtype=bool)
        follows[packed.start[:-1][packed.start[:-1] < n]] = False
        assert (packed.offsets[follows] == ends[np.flatnonzero(follows) - 1]).all()


def test_packing_is_a_pure_function_of_lengths_width_and_seed():
    lengths = np.random.default_rng(0).choice([3, 5, 8], 500)
    a, b, c = (pack_examples(lengths, 16, seed) for seed in (1, 1, 2))
    assert all(np.array_equal(getattr(a, f), getattr(b, f)) for f in ("start", "examples", "offsets"))
    assert len(a) == len(c) and packed_rows(a) != packed_rows(c)  # the seed only orders equal lengths
    assert sorted(a.used(lengths)) == sorted(c.used(lengths))
    with pytest.raises(ValueError, match=r"lengths must lie in \[1, 16\], got 3\.\.17"):
        pack_examples([3, 17], 16, seed=0)


@pytest.fixture(scope="module")
def cache(tiny_tokenizer, tmp_path_factory):
    out = tmp_path_factory.mktemp("sft_packing")
    build_sft_cache(CHATS, str(out), tokenizer=tiny_tokenizer, val_frac=0.0, seed=0, t_max=100_000)
    return out


def open_ds(cache, T, truncation="head", **kw):
    return SFTExampleDataset.from_cache_dir(cache, T=T, truncation=truncation, **kw)


@pytest.mark.parametrize("truncation", ["head", "tail", "prompt"])
@pytest.mark.parametrize("T", [16, 64, 700])
def test_every_example_keeps_its_own_targets_in_a_packed_row(tiny_tokenizer, cache, T, truncation):
    ds = open_ds(cache, T, truncation, packing=True, seed=3)
    expected = expected_rows(tiny_tokenizer, CHATS, T, truncation)  # padded rows, from render_chat_sft
    kept = [i for i, (_, _, ym) in enumerate(expected) if any(v != -100 for v in ym)]
    assert ds.kept.tolist() == kept
    x, y, ym, seg, pos = ds.rows(np.arange(len(ds)))
    assert x.shape == ym.shape == seg.shape == pos.shape == (len(ds), T)
    assert seg.dtype == np.int32 and pos.dtype == x.dtype == ym.dtype == np.int64
    assert (y[:, :-1] == x[:, 1:]).all() and ((ym != -100).sum(1) > 0).all()  # no row is all ignored
    seen = []
    for r in range(len(ds)):
        slot = 0
        for k, e in enumerate(ds.packed.examples[ds.packed.start[r] : ds.packed.start[r + 1]].tolist(), 1):
            i = kept[e]
            n = len(kept_positions(tiny_tokenizer, CHATS[i], T, truncation))
            ex, _, eym = expected[i]
            assert x[r, slot : slot + n - 1].tolist() == ex[: n - 1]  # its tokens, in order
            assert ym[r, slot : slot + n - 1].tolist() == eym[: n - 1]  # its own targets, unchanged
            inside = slice(slot, min(slot + n, T))
            assert (seg[r, inside] == k).all() and pos[r, inside].tolist() == list(range(inside.stop - slot))
            slot += n
            if slot <= T:  # the target after its last token (the next example's first, or padding)
                assert ym[r, slot - 1] == -100
            seen.append(i)
        pad = slice(slot, T)
        assert (seg[r, pad] == 0).all() and (x[r, pad] == tiny_tokenizer.eot_id).all() and (ym[r, pad] == -100).all()
        assert pos[r, pad].tolist() == list(range(max(T - slot, 0)))  # the padding counts from 0 again
    assert sorted(seen) == kept  # every kept example exactly once
    if T == 700:
        assert len(ds) < len(kept) / 4 and ds.fill > 0.95  # many short examples per row


def test_a_target_crossing_into_the_next_example_is_ignored_whatever_the_mask(cache):
    # a cached example starts with a role token, never loss-active: make every token active to see the rule
    ds = open_ds(cache, 700, packing=True)
    ds.mask = np.ones_like(ds.mask)
    x, y, ym, seg, pos = ds.rows(np.arange(len(ds)))
    crossing = np.zeros_like(ym, dtype=bool)  # the target is the first token of example 2..k of the row
    crossing[:, :-1] = (pos[:, 1:] == 0) & (seg[:, 1:] > 1)
    assert crossing.sum() > 100 and (ym[crossing] == -100).all()
    same = np.zeros_like(crossing)
    same[:, :-1] = (seg[:, :-1] > 0) & (seg[:, 1:] == seg[:, :-1])  # input and target of one example
    assert (ym[same] == y[same]).all()


def test_get_batch_draws_rows_with_the_padded_signature(cache):
    ds = open_ds(cache, 64, packing=True)
    batch = ds.get_batch(B=8, generator=torch.Generator().manual_seed(5))
    ids = torch.randint(len(ds), (8,), generator=torch.Generator().manual_seed(5)).numpy()
    assert len(batch) == 5 and all(torch.equal(t, torch.from_numpy(a)) for t, a in zip(batch, ds.rows(ids)))
    assert [t.dtype for t in batch] == [torch.int64] * 3 + [torch.int32, torch.int64]
    assert "packed into" in repr(ds) and len(open_ds(cache, 64)) == len(ds.kept) > len(ds)


@pytest.mark.parametrize("packing", [False, True])
def test_ignore_index_is_the_only_value_that_changes(cache, packing):
    default = open_ds(cache, 64, packing=packing).rows(np.arange(20))
    nano = open_ds(cache, 64, packing=packing, ignore_index=-1).rows(np.arange(20))
    assert (nano[2] == np.where(default[2] == -100, -1, default[2])).all() and (nano[2] != -100).all()
    assert all((a == b).all() for i, (a, b) in enumerate(zip(default, nano)) if i != 2)


def test_packing_reads_the_cache_without_changing_it(cache):
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(cache.iterdir())}
    packed = open_ds(cache, 64, packing=True)
    packed.get_batch(B=4, generator=torch.Generator().manual_seed(0))
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(cache.iterdir())} == before
    padded = open_ds(cache, 64)
    assert padded.identity != packed.identity != open_ds(cache, 64, packing=True, seed=1).identity
    assert padded.identity == open_ds(cache, 64, seed=1).identity  # the seed only matters when packing
