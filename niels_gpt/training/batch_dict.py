"""Dict batches: the rows of every reader under the names torch training code and Hugging Face models use.

A dict batch holds int64 tensors of shape (B, T) (a dict item of a map-style dataset: (T,)):
  input_ids     x: the first T ids of each T+1 window (pretrain, byte rows) or the row's inputs (SFT rows);
  labels        UNSHIFTED (the Hugging Face convention, the model shifts): labels[:, t] is input_ids[:, t]
                when that token is a loss-active target (the model at position t-1 must predict it), else
                IGNORE_INDEX (-100). So labels[:, 0] is always -100 and labels[:, 1:] == shift_labels[:, :-1];
  shift_labels  the same targets already shifted: shift_labels[:, t] is the target of position t (y_masked;
                y for pretrain and byte rows), the window's last target included. transformers' causal-LM
                loss uses shift_labels when given, so `model(**batch).loss` counts all T targets and equals
                `cross_entropy(logits.view(-1, V), shift_labels.view(-1), ignore_index=-100)`; a consumer
                that ignores shift_labels still gets a correct loss over T-1 targets from labels;
  position_ids  0..T-1 (pretrain, byte and padded SFT rows); packed rows: the position inside each example,
                restarting at 0 at every example start and for the padding tail;
  segment_ids   packed SFT rows only: the example number inside the row (1..k; 0 = padding).
The ignore value is always -100: y_masked read with another negative ignore_index is converted, a
non-negative one (it could be a token id) is refused. In packed rows a token that starts an example is
never a target (the SFT reader ignores it), so the last token of example i predicts nothing of example i+1.
`Batch` is a MixedLoader batch as named tensors (x, y, ...; loader.py); `Batch.as_dict()` its dict batch.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch

from niels_gpt.chat_template import IGNORE_INDEX

KEYS = ("input_ids", "labels", "shift_labels", "position_ids")  # every dict batch; packed rows add segment_ids
PACKED_KEYS = (*KEYS, "segment_ids")


def _int64(a) -> torch.Tensor:
    t = torch.from_numpy(a) if isinstance(a, np.ndarray) else a
    return t if t.dtype == torch.int64 else t.to(torch.int64)


@functools.lru_cache(maxsize=8)
def _positions(B: int, T: int, device: torch.device) -> torch.Tensor:
    """0..T-1 in each of B rows (int64, contiguous): a template the batches copy (a copy costs a third of
    arange(T).repeat(B, 1) at B=64 T=256), never handed out itself."""
    return torch.arange(T, dtype=torch.int64, device=device).repeat(B, 1)


@functools.lru_cache(maxsize=8)
def positions(B: int, T: int) -> np.ndarray:
    """The position_ids template of (B, T) rows on the CPU as a read-only numpy array (copy it, never write)."""
    template = np.arange(T, dtype=np.int64)[None, :].repeat(B, axis=0)
    template.flags.writeable = False
    return template


def check_ignore_index(ignore_index: int) -> int:
    """`ignore_index` if dict batches can take y_masked that ignores it (any negative value), else one error."""
    if ignore_index >= 0:
        raise ValueError(
            f"y_masked ignores {ignore_index}, which could be a token id; dict batches ignore {IGNORE_INDEX}: "
            f"open the SFT caches with ignore_index={IGNORE_INDEX} (the default)"
        )
    return ignore_index


def as_dict(
    x, y, y_masked=None, segment_ids=None, position_ids=None, *, ignore_index: int = IGNORE_INDEX, one_buffer=False
) -> dict:
    """The dict batch of rows given as a reader returns them ((B, T) numpy arrays or tensors, in the order
    of a reader's tuple): `y_masked` (SFT rows) ignores `ignore_index`, None for pretrain and byte rows.
    `one_buffer=True`: every tensor a view of one (fields, B, T) buffer, so that pickled to another process (a
    DataLoader worker's batch to the main process) the batch travels as one shared-memory block, not one per key."""
    x, y = _int64(x), _int64(y)
    if x.dim() != 2 or x.shape != y.shape:
        raise ValueError(f"x and y must be (B, T) of one shape, got {tuple(x.shape)} and {tuple(y.shape)}")
    if y_masked is not None:
        check_ignore_index(ignore_index)
    B, T = x.shape
    if one_buffer:
        keys = KEYS if segment_ids is None else PACKED_KEYS
        batch = dict(zip(keys, torch.empty((len(keys), B, T), dtype=torch.int64, device=x.device)))
        batch["input_ids"].copy_(x)
        shift_labels = batch["shift_labels"]
        shift_labels.copy_(y if y_masked is None else _int64(y_masked))
        if y_masked is not None and ignore_index != IGNORE_INDEX:
            shift_labels.masked_fill_(shift_labels == ignore_index, IGNORE_INDEX)
        labels = batch["labels"]
        if position_ids is None:
            batch["position_ids"].copy_(_positions(B, T, x.device))
        else:
            batch["position_ids"].copy_(_int64(position_ids))
        if segment_ids is not None:
            batch["segment_ids"].copy_(_int64(segment_ids))
    else:
        if y_masked is None:
            shift_labels = y
        else:
            shift_labels = _int64(y_masked)
            if ignore_index != IGNORE_INDEX:
                shift_labels = shift_labels.masked_fill(shift_labels == ignore_index, IGNORE_INDEX)
        labels = torch.empty_like(shift_labels)
        if position_ids is None:
            position_ids = _positions(B, T, x.device).clone()
        batch = {"input_ids": x, "labels": labels, "shift_labels": shift_labels, "position_ids": _int64(position_ids)}
        if segment_ids is not None:
            batch["segment_ids"] = _int64(segment_ids)
    labels[:, 0] = IGNORE_INDEX
    labels[:, 1:] = shift_labels[:, :-1]
    return batch


def items(batch: dict) -> list[dict]:
    """The rows of a dict batch as dict items ((T,) views), in order; default_collate stacks them back."""
    rows = len(batch["input_ids"])
    return [{key: value[i] for key, value in batch.items()} for i in range(rows)]


@dataclass(frozen=True)
class Batch:
    """x, y: (B, T) int64 on the sources' device; SFT sources add y_masked (int64), packed SFT sources
    segment_ids (int32, 0 = padding, 1..k = the k-th example of the row) and position_ids (int64,
    restarting at 0 at each example); fields a source does not return are None.
    source: int64 (B,) on the CPU, row i came from `loader.names[source[i]]`. step: the batch number.
    epochs (epoch mode, else None): {name: epochs of that source this rank has completed}."""

    x: torch.Tensor
    y: torch.Tensor
    source: torch.Tensor
    step: int
    y_masked: torch.Tensor | None = None
    segment_ids: torch.Tensor | None = None
    position_ids: torch.Tensor | None = None
    epochs: dict[str, int] | None = None  # epoch mode: completed epochs of each source after this batch

    def as_dict(self, ignore_index: int = IGNORE_INDEX, *, one_buffer: bool = False) -> dict[str, torch.Tensor]:
        """The dict batch of these rows (niels_gpt.training.batch_dict: input_ids, labels, shift_labels,
        position_ids, packed rows segment_ids); `ignore_index`: what y_masked ignores (loader.ignore_index);
        `one_buffer`: its tensors views of one buffer (one shared-memory block when sent to another process)."""
        fields = (self.x, self.y, self.y_masked, self.segment_ids, self.position_ids)
        return as_dict(*fields, ignore_index=ignore_index, one_buffer=one_buffer)
