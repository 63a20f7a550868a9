"""Dict batches: input_ids, unshifted labels, shift_labels, position_ids (and segment_ids), ignore value -100."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, default_collate

from niels_gpt.training.batch_dict import KEYS, PACKED_KEYS, as_dict, check_ignore_index, items
from niels_gpt.training.mixture import MixedBatches

B, T = 3, 6


def windows(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rows = np.random.default_rng(seed).integers(0, 50, (B, T + 1), dtype=np.uint16)
    return rows[:, :-1].astype(np.int64), rows[:, 1:].astype(np.int64)


def test_pretrain_rows_labels_are_the_unshifted_targets_and_shift_labels_are_y():
    x, y = windows()
    batch = as_dict(x, y)
    assert tuple(batch) == KEYS and all(t.dtype == torch.int64 and t.shape == (B, T) for t in batch.values())
    assert torch.equal(batch["input_ids"], torch.from_numpy(x)) and torch.equal(
        batch["shift_labels"], torch.from_numpy(y)
    )
    assert (batch["labels"][:, 0] == -100).all()
    assert torch.equal(batch["labels"][:, 1:], batch["input_ids"][:, 1:])  # every token is a target of its left side
    assert torch.equal(batch["position_ids"], torch.arange(T).repeat(B, 1))


def test_every_batch_owns_its_position_ids():
    x, y = windows()
    first, second = as_dict(x, y), as_dict(x, y)
    first["position_ids"] += 7  # a training step that writes into its batch
    assert torch.equal(second["position_ids"], torch.arange(T).repeat(B, 1))
    assert torch.equal(as_dict(x, y)["position_ids"], torch.arange(T).repeat(B, 1))
    x2, y2 = np.concatenate([x, x]), np.concatenate([y, y])  # another B: its own positions
    assert torch.equal(as_dict(x2, y2)["position_ids"], torch.arange(T).repeat(2 * B, 1))


def test_sft_rows_labels_hold_y_masked_one_to_the_right():
    x, y = windows(1)
    y_masked = np.where(np.arange(T) % 2 == 0, y, -100)
    batch = as_dict(x, y, y_masked)
    assert torch.equal(batch["shift_labels"], torch.from_numpy(y_masked))
    assert torch.equal(batch["labels"][:, 1:], batch["shift_labels"][:, :-1]) and (batch["labels"][:, 0] == -100).all()
    active = batch["labels"] != -100
    assert torch.equal(batch["labels"][active], batch["input_ids"][active])  # a label is its own token


def test_the_loss_over_labels_shifted_is_the_loss_over_shift_labels_less_the_last_target():
    x, y = windows(2)
    batch = as_dict(x, y, np.where(y % 3 == 0, -100, y))
    logits = torch.randn(B, T, 50, generator=torch.Generator().manual_seed(0))
    hf = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, 50), batch["labels"][:, 1:].reshape(-1))
    ours = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, 50), batch["shift_labels"][:, :-1].reshape(-1))
    assert torch.equal(hf, ours)


def test_packed_rows_keep_their_segment_and_position_ids_as_int64():
    x, y = windows(3)
    segments = np.array([[1, 1, 2, 2, 2, 0]] * B, dtype=np.int32)
    positions = np.array([[0, 1, 0, 1, 2, 0]] * B, dtype=np.int64)
    batch = as_dict(x, y, y, segments, positions)
    assert tuple(batch) == PACKED_KEYS and batch["segment_ids"].dtype == torch.int64
    assert torch.equal(batch["position_ids"], torch.from_numpy(positions))


def test_another_negative_ignore_value_is_converted_a_token_id_is_refused():
    x, y = windows(4)
    y_masked = np.where(y % 2 == 0, y, -1)
    assert torch.equal(
        as_dict(x, y, y_masked, ignore_index=-1)["shift_labels"], torch.from_numpy(np.where(y % 2 == 0, y, -100))
    )
    with pytest.raises(ValueError, match="could be a token id"):
        as_dict(x, y, y_masked, ignore_index=0)
    assert check_ignore_index(-100) == -100


def test_items_are_rows_and_default_collate_stacks_them_back():
    batch = as_dict(*windows(5))
    rows = items(batch)
    assert len(rows) == B and rows[1]["labels"].shape == (T,)
    assert all(torch.equal(v, batch[k]) for k, v in default_collate(rows).items())


def test_tensors_from_a_loader_batch_keep_their_values():
    x, y = (torch.from_numpy(a) for a in windows(6))
    batch = as_dict(x, y)
    assert batch["input_ids"] is x and batch["shift_labels"] is y
    with pytest.raises(ValueError, match="must be \\(B, T\\)"):
        as_dict(x[0], y[0])


def one_buffer_cases():
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 99, (2, 3, 6))
    y_masked = np.where(rng.random((3, 6)) < 0.5, y, -1)
    seg = rng.integers(0, 3, (3, 6)).astype(np.int32)
    pos = rng.integers(0, 6, (3, 6))
    return [(x, y), (x, y, y_masked), (x, y, y_masked, seg, pos)]


@pytest.mark.parametrize("rows", one_buffer_cases(), ids=["pretrain", "sft", "packed"])
def test_a_one_buffer_batch_holds_the_same_tensors_as_views_of_one_buffer(rows):
    want, got = as_dict(*rows, ignore_index=-1), as_dict(*rows, ignore_index=-1, one_buffer=True)
    assert type(got) is dict and list(got) == list(want)
    assert all(torch.equal(got[k], want[k]) and got[k].dtype == torch.int64 and got[k].is_contiguous() for k in want)
    assert len({t.untyped_storage().data_ptr() for t in got.values()}) == 1
    back = pickle.loads(pickle.dumps(got))
    assert type(back) is dict and all(torch.equal(back[k], got[k]) for k in got)


def test_dataloader_workers_hand_over_compact_batches_not_shared_memory(loader_caches):
    mix = MixedBatches.pretrain(loader_caches, p={"wikitext": 0.5, "gutenberg": 0.5}, T=16, B=4, seed=0)
    alone = [b for _, b in zip(range(4), DataLoader(mix, batch_size=None))]
    workers = [b for _, b in zip(range(4), DataLoader(mix, batch_size=None, num_workers=2))]
    for a, w in zip(alone, workers):
        assert type(w) is dict and list(w) == list(a) and all(torch.equal(w[k], a[k]) for k in a)
        # the compact handover (training/handover.py): bytes unpickled into the dict, no shared-memory block
        assert not any(t.is_shared() for t in w.values()) and all(t.is_contiguous() for t in w.values())
