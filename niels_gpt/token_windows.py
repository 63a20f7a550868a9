"""Rows of T+1 consecutive ids cut from several 1-D arrays: a pretrain split's shards, byte streams.

A window is T+1 consecutive ids of one array; x is its first T ids and y its last T, so
`y[:, :-1] == x[:, 1:]`. Readers keep a "window view" of each array: the (n - T, T+1) strided view
whose row s is `ids[s : s + T + 1]` (no copy; indexing it reads only the rows asked for). They
address windows in two ways:
  - random: any start s in [0, n - T) of an array (the readers' `get_batch`);
  - epoch (`StrideTiling`): the windows at starts 0, T, 2T, ... tile each array, neighbours sharing
    one id (the last y of a window is the first x of the next), so every id is a target exactly once.
    An array of n ids holds (n - 1) // T such windows; its last n - 1 - T * ((n - 1) // T) ids (fewer
    than T: the tail that is shorter than T+1 once the last window's final id is counted) are in no
    window, and an array shorter than T+1 holds none; `dropped_tokens` counts them. Windows are
    numbered array by array: window j of array a has number `first[a] + j`.
`gather_rows(views, which, starts)` reads the rows of several arrays with one vectorized index per
array (into a reused buffer when given), and `split_xy(rows)` cuts x and y from them and casts both to
int64 in one copy (`xy_view`: the two as one view, for a caller that casts into its own buffer).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class StrideTiling:
    """The stride-T windows of T+1 ids over arrays of `lengths` ids, numbered array by array."""

    def __init__(self, lengths: Sequence[int], T: int):
        lengths = np.asarray(lengths, dtype=np.int64)
        self.T = T
        self.counts = np.where(lengths >= T + 1, (lengths - 1) // T, 0)  # windows per array
        self.first = np.cumsum(self.counts) - self.counts  # number of each array's window 0
        self.num_windows = int(self.counts.sum())
        self.dropped_tokens = int((lengths - np.where(self.counts > 0, self.counts * T + 1, 0)).sum())

    def locate(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(array index, start id) of windows `ids` (int64 in [0, num_windows))."""
        ids = np.asarray(ids, dtype=np.int64)
        if len(ids) and (ids.min() < 0 or ids.max() >= self.num_windows):
            raise IndexError(f"window ids must lie in [0, {self.num_windows:,}), got {ids.min()}..{ids.max()}")
        array = self.first.searchsorted(ids, side="right") - 1  # "right": arrays with no window are skipped
        return array, (ids - self.first[array]) * self.T


def gather_rows(
    views: Sequence[np.ndarray], which: np.ndarray, starts: np.ndarray, out: np.ndarray | None = None
) -> np.ndarray:
    """(len(starts), T+1) rows: row i is `views[which[i]][starts[i]]`, in input order; written into `out`
    (a buffer reused from batch to batch, of a dtype that holds every view's values) when given.

    One array: one vectorized index. Several: rows are grouped by array with a stable sort and each group
    is read with one vectorized index and written straight to its rows.
    """
    if len(views) == 1 and out is None:
        return views[0][starts]
    if out is None:
        out = np.empty((len(starts), views[0].shape[1]), dtype=np.result_type(*(v.dtype for v in views)))
    if len(views) == 1:
        out[...] = views[0][starts]
        return out
    order = np.argsort(which, kind="stable")
    end = 0
    for k, count in enumerate(np.bincount(which, minlength=len(views)).tolist()):
        if count:
            picked = order[end : end + count]
            out[picked] = views[k][starts[picked]]
            end += count
    return out


def xy_view(rows: np.ndarray) -> np.ndarray:
    """x = rows[:, :-1] and y = rows[:, 1:] as one (2, B, T) view of the C-contiguous `rows` (no copy)."""
    B, width = rows.shape
    item = rows.itemsize
    return np.ndarray((2, B, width - 1), rows.dtype, rows, 0, (item, width * item, item))


def split_xy(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x = rows[:, :-1], y = rows[:, 1:] as C-contiguous int64 arrays, cast in one copy.

    `rows` must be C-contiguous (what gather_rows returns): x and y are two overlapping (B, T) views
    of it (`xy_view`), cast together.
    """
    xy = xy_view(rows).astype(np.int64, order="C")
    return xy[0], xy[1]
