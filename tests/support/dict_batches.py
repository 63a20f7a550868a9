"""Helpers of the torch.utils.data tests: a loader's first batches, and equality of lists of dict batches."""

from __future__ import annotations

import torch


def take(loader, n: int) -> list[dict]:
    """The first n batches of a new iterator over `loader` (its workers stop when it is collected)."""
    it = iter(loader)
    return [next(it) for _ in range(n)]


def same(a: list[dict], b: list[dict]) -> bool:
    """Equal lengths, and batch by batch the same keys holding equal tensors."""
    return len(a) == len(b) and all(
        x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x) for x, y in zip(a, b)
    )
