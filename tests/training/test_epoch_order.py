"""Epoch order: a seeded bijection of [0, n) per (seed, epoch), and disjoint rank slices that cover it."""

from __future__ import annotations

import numpy as np
import pytest

from niels_gpt.training import epoch_order
from niels_gpt.training.epoch_order import EpochPermutation, RankCursor, items_per_epoch


@pytest.mark.parametrize("n", [*range(1, 70), 255, 256, 257, 4095, 4096, 4097, 65537, 300_001])
def test_every_epoch_is_a_permutation(n):
    for seed, epoch in ((0, 0), (7, 3)):
        order = EpochPermutation(n, seed, epoch)(np.arange(n))
        assert order.dtype == np.int64 and np.array_equal(np.sort(order), np.arange(n))


def test_order_is_a_pure_function_of_seed_and_epoch():
    n = 10_000
    a = EpochPermutation(n, 5, 2)(np.arange(n))
    assert np.array_equal(a, EpochPermutation(n, 5, 2)(np.arange(n)))
    assert np.array_equal(a[1234:1300], EpochPermutation(n, 5, 2)(np.arange(1234, 1300)))  # any position alone
    for other in (EpochPermutation(n, 5, 3), EpochPermutation(n, 6, 2)):
        b = other(np.arange(n))
        assert (a == b).mean() < 0.01  # a new epoch or seed is a new order, not a shifted one


def test_order_looks_shuffled():
    n = 1_000_000
    order = EpochPermutation(n, 3, 0)(np.arange(n))
    assert abs(np.corrcoef(np.arange(n), order)[0, 1]) < 0.01
    assert abs(np.corrcoef(order[:-1], order[1:])[0, 1]) < 0.01
    first = order[: n // 10]  # the first tenth of an epoch spreads over all ten tenths of the items
    assert np.all(np.abs(np.bincount(first // (n // 10), minlength=10) - n // 100) < 400)


def test_a_trillion_items_need_no_table():
    n = 10**12
    perm = EpochPermutation(n, 1, 0)
    positions = np.array([0, 1, n // 2, n - 1])
    items = perm(positions)
    assert len(set(items.tolist())) == 4 and items.min() >= 0 and items.max() < n
    assert perm.half_bits == 20 and len(perm._keys) == epoch_order.ROUNDS  # the whole state: 6 keys


@pytest.mark.parametrize("world_size", [1, 2, 3])
@pytest.mark.parametrize("n", [1, 2, 3, 10, 4097, 9001])
def test_ranks_are_disjoint_and_cover_every_item_once_per_epoch(n, world_size):
    if n < world_size:
        return
    for epoch in (0, 1):
        seen = []
        for rank in range(world_size):
            cursor = RankCursor(n, 11, rank=rank, world_size=world_size, epoch=epoch)
            per_epoch = items_per_epoch(n, rank, world_size)
            assert per_epoch == len(range(rank, n, world_size))
            got = cursor.take(per_epoch)
            assert (cursor.epoch, cursor.cursor) == (epoch + 1, 0)  # rolled over right at the end
            assert np.array_equal(got, EpochPermutation(n, 11, epoch)(np.arange(rank, n, world_size)))
            seen.append(got)
        assert np.array_equal(np.sort(np.concatenate(seen)), np.arange(n))


def test_takes_of_any_size_cross_blocks_and_epochs_seamlessly():
    n = epoch_order.BLOCK + 123
    whole = RankCursor(n, 2, rank=1, world_size=2).take(3 * items_per_epoch(n, 1, 2))
    pieces = RankCursor(n, 2, rank=1, world_size=2)
    rng = np.random.default_rng(0)
    got = []
    while sum(map(len, got)) < len(whole):
        got.append(pieces.take(int(rng.integers(0, 700))))
    assert np.array_equal(np.concatenate(got)[: len(whole)], whole)
    per_epoch = items_per_epoch(n, 1, 2)
    epochs = whole.reshape(3, per_epoch)
    assert all(len(np.unique(e)) == per_epoch for e in epochs)  # no item twice within an epoch
    assert not np.array_equal(epochs[0], epochs[1])  # each epoch is a new order (and a new share of items)


def test_a_cursor_restored_from_epoch_and_cursor_continues_exactly():
    n = 5000
    original = RankCursor(n, 9, rank=2, world_size=3)
    original.take(2000)  # past the end of epoch 0 (1,666 items on rank 2)
    state = (original.epoch, original.cursor)
    assert state == (1, 2000 - 1666)
    restored = RankCursor(n, 9, rank=2, world_size=3, epoch=state[0], cursor=state[1])
    assert np.array_equal(restored.take(3000), original.take(3000))


def test_too_few_items_for_the_ranks_and_bad_positions_are_refused():
    for rank in (0, 2):  # every rank refuses, also those that would have an item
        with pytest.raises(ValueError, match="2 items cannot be shared by world_size=3 ranks"):
            RankCursor(2, 0, rank=rank, world_size=3)
    with pytest.raises(ValueError, match=r"cursor in \[0, 5\)"):
        RankCursor(10, 0, rank=0, world_size=2, cursor=5)
    with pytest.raises(ValueError, match="at least one item"):
        EpochPermutation(0, 0, 0)
