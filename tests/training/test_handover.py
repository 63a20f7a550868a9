"""A worker's batch crosses to the main process as compact bytes and arrives as the same dict batch."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from niels_gpt.training.batch_dict import as_dict
from niels_gpt.training.handover import Handover, narrowest, unpack


def arrived(fields, ignore_index=-100) -> dict:
    """What the main process gets: the Handover pickled (as a worker's queue does) and unpickled."""
    return pickle.loads(pickle.dumps(Handover(fields, ignore_index)))


def assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert a[key].dtype == b[key].dtype == torch.int64, key
        assert torch.equal(a[key], b[key]), key


@pytest.mark.parametrize(
    ("values", "dtype"),
    [
        ([0, 255], np.uint8),
        ([0, 256], np.uint16),
        ([0, 65_535], np.uint16),
        ([-100, 32_767], np.int16),
        ([-100, 40_000], np.int32),
        ([0, 2**40], np.int64),
        ([], np.int64),
    ],
)
def test_each_field_travels_in_the_narrowest_type_that_holds_it(values, dtype):
    assert narrowest(np.array(values, dtype=np.int64)) == np.dtype(dtype)


def test_pretrain_rows_arrive_as_the_dict_batch_in_a_quarter_of_the_bytes():
    rows = torch.randint(0, 50_000, (8, 33), generator=torch.Generator().manual_seed(1))
    x, y = rows[:, :-1], rows[:, 1:]
    assert_same(arrived((x, y, None, None, None)), as_dict(x, y))
    fn, (payload, _, _) = Handover((x, y, None, None, None), -100).__reduce__()
    assert fn is unpack and len(payload) == rows.numel() * 2  # the uint16 rows once, not x and y as int64
    for key, value in arrived((x, y, None, None, None)).items():
        assert value.is_contiguous(), key


def test_a_y_that_is_not_x_shifted_travels_on_its_own():
    x = torch.randint(0, 1000, (4, 10), generator=torch.Generator().manual_seed(5))
    y = x.roll(-1, dims=1)
    y[2, 3] += 1  # one id differs from the shift: y cannot come from x's rows
    assert_same(arrived((x, y, None, None, None)), as_dict(x, y))
    _, (payload, _, _) = Handover((x, y, None, None, None), -100).__reduce__()
    assert len(payload) == 2 * x.numel() * 2


def test_sft_rows_keep_their_ignored_targets_and_large_ids():
    g = torch.Generator().manual_seed(2)
    x = torch.randint(0, 60_000, (4, 16), generator=g)
    y = torch.randint(0, 60_000, (4, 16), generator=g)
    y_masked = torch.where(torch.rand((4, 16), generator=g) < 0.4, torch.tensor(-100), y)
    assert_same(arrived((x, y, y_masked, None, None)), as_dict(x, y, y_masked))


def test_packed_rows_keep_segments_and_positions():
    x = torch.arange(24).reshape(2, 12)
    segment_ids = torch.tensor([[1] * 5 + [2] * 4 + [0] * 3, [1] * 12], dtype=torch.int32)
    position_ids = torch.tensor([list(range(5)) + list(range(4)) + [0, 1, 2], list(range(12))])
    y_masked = torch.where(segment_ids == 0, torch.tensor(-100), x)
    fields = (x, x + 1, y_masked, segment_ids, position_ids)
    assert_same(arrived(fields), as_dict(*fields))


def test_another_negative_ignore_index_is_converted_as_in_the_main_process():
    x = torch.randint(0, 100, (3, 8))
    y_masked = torch.where(x % 3 == 0, torch.tensor(-1), x)
    got = arrived((x, x, y_masked, None, None), ignore_index=-1)
    assert_same(got, as_dict(x, x, y_masked, ignore_index=-1))
    assert (got["shift_labels"] == -100).any() and not (got["shift_labels"] == -1).any()


def test_numpy_fields_and_the_local_dict_match_too():
    rows = np.random.default_rng(3).integers(0, 1000, (5, 9))
    fields = (rows[:, :-1], rows[:, 1:], None, None, None)
    assert_same(arrived(fields), Handover(fields, -100).as_dict())
