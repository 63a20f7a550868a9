"""A DataLoader worker's batch handed to the main process as one compact byte string.

torch pickles a tensor made in a worker as a shared-memory block, and the main process fetches each block's
file descriptor from the worker's resource-sharer thread: a socket connection and an authentication
handshake with the worker per block, during which the main thread waits (measured in
benchmarks/bench_batch_paths.py, "handover"). A batch's fields are small integers (token ids below the
vocabulary, -100, positions below T), so a worker sends instead the fields the dict batch is made from
(x, y, y_masked, segment_ids, position_ids: a reader's tuple), each narrowed to the smallest integer type
that holds its values (uint16 for token ids), in ONE bytes object inside the pickle. When y is x shifted by
one (pretrain, byte and SFT rows: the T+1 ids of each window), the (B, T+1) rows are sent once for both.

Unpickling it in the main process (or in the DataLoader's pin-memory thread with pin_memory=True) IS the
batch: `unpack` widens the fields into one int64 buffer and returns the dict batch the worker would have
made (batch_dict.as_dict's values; each key a contiguous view of that buffer), so nothing in the training
loop changes (37 us at B=64 T=256, 58 us at B=32 T=1024 on the 2-core CPU machine). A B=64 T=256 batch is
33 KB (64 x 257 uint16 ids) instead of 524 KB (four int64 fields): it fits in one pipe buffer (64 KB), so
the worker's write does not wait for the main process's read.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from niels_gpt.chat_template import IGNORE_INDEX
from niels_gpt.training import batch_dict

SHIFTED = "shifted"  # the layout entry of y when it is the rows sent in x's place, shifted by one
# the narrow types tried in order: the first whose range holds every value of a field carries it
NARROW = tuple(np.dtype(t) for t in (np.uint8, np.uint16, np.int16, np.int32, np.int64))


def narrowest(a: np.ndarray) -> np.dtype:
    """The first of NARROW that holds every value of the integer array `a` (int64 when it is empty)."""
    if a.size == 0:
        return np.dtype(np.int64)
    lo, hi = int(a.min()), int(a.max())
    return next(t for t in NARROW if np.iinfo(t).min <= lo and hi <= np.iinfo(t).max)


class Handover:
    """The fields of one batch (tensors or arrays on the CPU, None where a reader has none), pickled as
    (unpack, (payload, layout, ignore_index)): unpickling gives the dict batch itself."""

    __slots__ = ("fields", "ignore_index")

    def __init__(self, fields, ignore_index: int):
        self.fields, self.ignore_index = tuple(fields), ignore_index

    def as_dict(self) -> dict[str, torch.Tensor]:
        """The dict batch of these fields, made here (no pickling)."""
        return batch_dict.as_dict(*self.fields, ignore_index=self.ignore_index)

    def __reduce__(self):
        arrays = [
            None if f is None else f.cpu().numpy() if isinstance(f, torch.Tensor) else np.asarray(f) for f in self
        ]
        x, y = arrays[0], arrays[1]
        shifted = x.ndim == 2 and x.shape == y.shape and np.array_equal(x[:, 1:], y[:, :-1])
        if shifted:  # x, y = rows[:, :-1], rows[:, 1:]: the rows once, and y marked as their shift
            arrays[0], arrays[1] = np.concatenate([x, y[:, -1:]], axis=1), None
        parts, layout, offset = [], [], 0
        for a in arrays:
            if a is None:
                layout.append(None)
                continue
            narrow = a.astype(narrowest(a), copy=False)
            parts.append(np.ascontiguousarray(narrow).tobytes())
            layout.append((narrow.dtype.str, narrow.shape, offset))
            offset += narrow.nbytes
        if shifted:
            layout[1] = SHIFTED
        return unpack, (b"".join(parts), tuple(layout), self.ignore_index)

    def __iter__(self):
        return iter(self.fields)


def _narrow_field(payload: bytes, entry) -> np.ndarray | None:
    """The read-only narrow array a layout entry (dtype, shape, offset) names in `payload`; None for a field
    not sent (None, or SHIFTED: y comes from x's rows)."""
    if entry is None or entry == SHIFTED:
        return None
    dtype, shape, offset = entry
    return np.frombuffer(payload, dtype=np.dtype(dtype), count=math.prod(shape), offset=offset).reshape(shape)


def unpack(payload: bytes, layout: tuple, ignore_index: int) -> dict[str, torch.Tensor]:
    """The dict batch of a Handover's payload, equal to batch_dict.as_dict of the worker's fields: every key a
    contiguous int64 view of ONE (keys, B, T) buffer, filled straight from the narrow fields (one allocation and
    one widening copy per key: half the time of widening each field and then calling as_dict). y marked
    SHIFTED is the rows sent in x's place, shifted by one."""
    x, y, y_masked, segment_ids, position_ids = (_narrow_field(payload, entry) for entry in layout)
    if layout[1] == SHIFTED:
        x, y = x[:, :-1], x[:, 1:]
    keys = batch_dict.KEYS if segment_ids is None else batch_dict.PACKED_KEYS
    B, T = x.shape
    buffer = np.empty((len(keys), B, T), dtype=np.int64)
    fields = dict(zip(keys, buffer))
    fields["input_ids"][...] = x
    targets = y if y_masked is None else y_masked
    if y_masked is not None:
        batch_dict.check_ignore_index(ignore_index)
    shift_labels, labels = fields["shift_labels"], fields["labels"]
    shift_labels[...] = targets
    labels[:, 0] = IGNORE_INDEX
    labels[:, 1:] = targets[:, :-1]  # from the payload: a copy between views of `buffer` costs numpy 10x more
    if y_masked is not None and ignore_index != IGNORE_INDEX:
        for field in (shift_labels, labels):
            field[field == ignore_index] = IGNORE_INDEX
    fields["position_ids"][...] = batch_dict.positions(B, T) if position_ids is None else position_ids
    if segment_ids is not None:
        fields["segment_ids"][...] = segment_ids
    return dict(zip(keys, torch.from_numpy(buffer).unbind(0)))
