"""niels_gpt.splits: how many items go to val, which ones (a seeded torch permutation), and the order kept."""

from __future__ import annotations

import pytest
import torch

from niels_gpt.splits import SPLIT_RULE, num_val, split_items, val_groups, val_mask


@pytest.mark.parametrize(
    "n, val_frac, want",
    [
        (0, 0.1, 0),
        (1, 0.5, 0),  # one item stays in train
        (2, 0.1, 1),  # raised to 1: an empty val split would fail every val consumer
        (19, 0.1, 1),
        (20, 0.1, 2),
        (10, 0.25, 2),
        (7, 0.99, 6),
        (10, 0.0, 0),  # no val asked, none given
    ],
)
def test_n_val_is_the_floor_raised_to_one_when_val_is_asked_for(n, val_frac, want):
    assert num_val(n, val_frac) == want


@pytest.mark.parametrize("val_frac", [-0.1, 1.0, 1.5])
def test_val_frac_outside_zero_to_one_is_refused(val_frac):
    with pytest.raises(ValueError) as e:
        val_mask(10, val_frac, 0)
    assert str(e.value) == f"val_frac must be in [0, 1), got {val_frac}"


@pytest.mark.parametrize("n, val_frac, seed", [(10, 0.3, 42), (7, 0.1, 0), (1000, 0.05, 7), (3, 0.0, 1)])
def test_val_is_the_first_n_val_of_a_seeded_randperm(n, val_frac, seed):
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()
    held_out = set(perm[: num_val(n, val_frac)])
    assert val_mask(n, val_frac, seed) == [i in held_out for i in range(n)]


def test_splits_are_pinned():
    # recorded splits (and the rule in every meta.json) must not move with a refactoring
    assert val_mask(10, 0.3, 42) == [False, True, True, False, False, False, True, False, False, False]
    assert split_items(list("abcdefghij"), 0.3, 1) == (list("acdehij"), list("bfg"))
    assert SPLIT_RULE == (
        "val = first n_val of torch.randperm(n, Generator.manual_seed(seed)); "
        "n_val = max(floor(n*val_frac), 1 if val_frac>0 and n>=2)"
    )


def test_split_items_keeps_the_input_order_in_each_split():
    items = [f"item{i}" for i in range(50)]
    train, val = split_items(items, 0.2, 3)
    mask = val_mask(50, 0.2, 3)
    assert val == [x for x, v in zip(items, mask) if v] and train == [x for x, v in zip(items, mask) if not v]
    assert len(val) == 10 and sorted(train + val, key=items.index) == items


def test_groups_are_split_as_items_in_order_of_first_appearance():
    keys = ["t2", "t1", "t2", "t3", "t1", "t4"]
    unique = ["t2", "t1", "t3", "t4"]
    for seed in range(5):
        assert val_groups(keys, 0.5, seed) == {g for g, v in zip(unique, val_mask(4, 0.5, seed)) if v}
    assert val_groups(keys, 0.5, 3) == {"t3", "t4"}
