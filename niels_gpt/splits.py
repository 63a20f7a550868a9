"""The one way to split anything into train/val: seeded torch RNG, by item or by group.

Used for roam files, primer dialogues and every SFT source (oasst1 groups threads by tree, so a
tree never straddles train and val). Torch RNG only, seeded from the one config seed, so every
split is a function of (items, val_frac, seed).

Rule: n_val = floor(n * val_frac), raised to 1 when val_frac > 0 and n >= 2 (an empty val split
would make every val consumer fail); the first n_val items of `torch.randperm(n)` under
`torch.Generator().manual_seed(seed)` are val. Order within each split is the input order.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import TypeVar

T = TypeVar("T")

SPLIT_RULE = (
    "val = first n_val of torch.randperm(n, Generator.manual_seed(seed)); "
    "n_val = max(floor(n*val_frac), 1 if val_frac>0 and n>=2)"
)


def num_val(n: int, val_frac: float) -> int:
    if not 0 <= val_frac < 1:
        raise ValueError(f"val_frac must be in [0, 1), got {val_frac}")
    k = math.floor(n * val_frac)
    if k == 0 and val_frac > 0 and n >= 2:
        k = 1
    return k


def val_mask(n: int, val_frac: float, seed: int) -> list[bool]:
    """is_val for each of n items."""
    import torch

    k = num_val(n, val_frac)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    mask = [False] * n
    for i in perm[:k].tolist():
        mask[i] = True
    return mask


def split_items(items: Sequence[T], val_frac: float, seed: int) -> tuple[list[T], list[T]]:
    """(train, val), each in input order."""
    mask = val_mask(len(items), val_frac, seed)
    return [x for x, v in zip(items, mask) if not v], [x for x, v in zip(items, mask) if v]


def val_groups(group_keys: Sequence[Hashable], val_frac: float, seed: int) -> set:
    """The set of group keys that go to val; groups are ordered by first appearance."""
    unique = list(dict.fromkeys(group_keys))
    mask = val_mask(len(unique), val_frac, seed)
    return {g for g, v in zip(unique, mask) if v}
