"""Stride-T tiling of several arrays, the grouped row gather and the x/y cut."""

from __future__ import annotations

import numpy as np
import pytest

from niels_gpt.token_windows import StrideTiling, gather_rows, split_xy


def test_windows_tile_each_array_and_the_tails_are_counted():
    tiling = StrideTiling([21, 5, 11, 10], T=5)  # T+1 = 6
    # 21 ids: starts 0, 5, 10, 15 (the last covers 15..20); 5 ids: too short; 11: 0, 5; 10: 0 (and 4 left)
    assert tiling.counts.tolist() == [4, 0, 2, 1] and tiling.num_windows == 7
    assert tiling.dropped_tokens == 0 + 5 + 0 + 4
    array, start = tiling.locate(np.arange(7))
    assert array.tolist() == [0, 0, 0, 0, 2, 2, 3] and start.tolist() == [0, 5, 10, 15, 0, 5, 0]
    with pytest.raises(IndexError, match=r"\[0, 7\)"):
        tiling.locate(np.array([7]))


def test_every_id_but_the_first_of_an_array_is_a_target_once():
    ids = np.arange(1000, dtype=np.uint16)
    T = 7
    tiling = StrideTiling([len(ids)], T)
    view = np.lib.stride_tricks.sliding_window_view(ids, T + 1)
    x, y = split_xy(gather_rows([view], *tiling.locate(np.arange(tiling.num_windows))))
    targets = np.sort(y.ravel())
    assert np.array_equal(targets, np.arange(1, 1 + tiling.num_windows * T))  # each once, none skipped
    assert len(ids) - 1 - len(targets) == tiling.dropped_tokens < T
    assert np.array_equal(x[1:, 0], y[:-1, -1])  # neighbours share exactly one id


def test_gather_reads_rows_of_several_arrays_in_input_order():
    arrays = [np.arange(100, 150, dtype=np.uint16), np.arange(500, 530, dtype=np.uint16)]
    views = [np.lib.stride_tricks.sliding_window_view(a, 4) for a in arrays]
    which, starts = np.array([1, 0, 1, 0, 0]), np.array([3, 0, 0, 46, 7])
    rows = gather_rows(views, which, starts)
    assert rows[:, 0].tolist() == [503, 100, 500, 146, 107] and rows.shape == (5, 4)
    x, y = split_xy(rows)
    assert x.dtype == y.dtype == np.int64 and x.flags.c_contiguous and y.flags.c_contiguous
    assert np.array_equal(x, rows[:, :-1]) and np.array_equal(y, rows[:, 1:])
