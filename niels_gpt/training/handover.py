"""A DataLoader worker's batch handed to the main process as one compact byte string.

torch pickles a tensor made in a worker as a shared-memory block, and the main process fetches each block's
file descriptor from the worker's resource-sharer thread: a socket connection and an authentication
handshake with the worker per block, during which the main thread waits (measured in
benchmarks/bench_batch_paths.py, "handover"). A batch's fields are small integers (token ids below the
vocabulary, -100, positions below T), so a worker sends instead the fields the dict batch is made from
(x, y, y_masked, segment_ids, position_ids: a reader's tuple), each narrowed to the smallest integer type
that holds its values (uint16 for token ids), in ONE bytes object inside the pickle. Unpickling it in the
main process (or in the DataLoader's pin-memory thread when pin_memory=True) IS the batch: `unpack` widens the
fields to int64 and returns the same dict batch (batch_dict.as_dict) the worker would have sent, so nothing in
the training loop changes. 64 x 257 token ids are 33 KB as uint16 against 132 KB as int64.
"""

from __future__ import annotations

import numpy as np
import torch

from niels_gpt.training import batch_dict

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
        parts, layout, offset = [], [], 0
        for field in self.fields:
            if field is None:
                layout.append(None)
                continue
            a = field.cpu().numpy() if isinstance(field, torch.Tensor) else np.asarray(field)
            narrow = a.astype(narrowest(a), copy=False)
            parts.append(np.ascontiguousarray(narrow).tobytes())
            layout.append((narrow.dtype.str, narrow.shape, offset))
            offset += narrow.nbytes
        return unpack, (b"".join(parts), tuple(layout), self.ignore_index)


def unpack(payload: bytes, layout: tuple, ignore_index: int) -> dict[str, torch.Tensor]:
    """The dict batch of a Handover's payload: every field widened to int64, then batch_dict.as_dict."""
    fields = []
    for entry in layout:
        if entry is None:
            fields.append(None)
            continue
        dtype, shape, offset = entry
        count = int(np.prod(shape))
        a = np.frombuffer(payload, dtype=np.dtype(dtype), count=count, offset=offset).reshape(shape)
        fields.append(torch.from_numpy(a.astype(np.int64)))
    return batch_dict.as_dict(*fields, ignore_index=ignore_index)
