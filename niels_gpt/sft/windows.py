"""Which tokens of an SFT example a training row keeps: the one definition of truncation.

An SFT cache stores every example whole; a row holds at most T+1 of its tokens (x = the first T,
y = the last T). For an example of n tokens the kept window is [lo, lo + width) with width = min(n, T+1):
  head  lo = 0              (the first T+1 tokens)
  tail  lo = n - width      (the last T+1 tokens: the latest turns)
Window position 0 is never a target, so an example is usable only if a loss-active token falls at
window positions 1..width-1. The writer drops examples that are not (for its T_max), the dataset
excludes them (for its T); both call `kept_windows` and `count_targets`, so they always agree.
"""

from __future__ import annotations

import numpy as np

TRUNCATIONS = ("head", "tail")
_CSUM_CHUNK = 1 << 22  # tokens per prefix-sum chunk: bounds the int64 temporary to 32 MB


def check_truncation(truncation: str) -> None:
    if truncation not in TRUNCATIONS:
        raise ValueError(f"truncation must be one of {TRUNCATIONS}, got {truncation!r}")


def kept_windows(starts: np.ndarray, lengths: np.ndarray, T: int, truncation: str) -> tuple[np.ndarray, np.ndarray]:
    """(lo, width): absolute start and length of each example's kept window (examples start at `starts`)."""
    check_truncation(truncation)
    starts, lengths = np.asarray(starts, dtype=np.int64), np.asarray(lengths, dtype=np.int64)
    width = np.minimum(lengths, T + 1)
    lo = starts if truncation == "head" else starts + lengths - width
    return lo, width


def _count_before(mask: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """For each p in `positions`: the number of True values in mask[:p] (chunked cumsum)."""
    positions = np.asarray(positions, dtype=np.int64)
    out = np.zeros(len(positions), dtype=np.int64)
    base = 0
    for lo in range(0, len(mask), _CSUM_CHUNK):
        hi = min(lo + _CSUM_CHUNK, len(mask))
        local = np.cumsum(mask[lo:hi], dtype=np.int64)
        sel = (positions > lo) & (positions <= hi)
        out[sel] = base + local[positions[sel] - lo - 1]
        out[positions > hi] = base + local[-1]
        base += int(local[-1])
    return out


def count_targets(mask: np.ndarray, lo: np.ndarray, width: np.ndarray) -> np.ndarray:
    """Loss-active targets in each window: True values of `mask` at window positions 1..width-1."""
    end = lo + width
    return _count_before(mask, end) - _count_before(mask, np.minimum(lo + 1, end))
