"""Rows on the host to tensors on the training device: what every reader's `get_batch` ends with.

`to_device(rows, device)` turns numpy arrays (or CPU tensors) into tensors on `device`:
  - cpu: `torch.from_numpy`, no copy;
  - cuda: each array is copied once into page-locked (pinned) host memory and sent with
    `non_blocking=True`. The host goes on at once and the GPU's copy engine runs the transfer in stream
    order, so a kernel that uses the tensor waits for it and nothing else does; torch's caching host
    allocator keeps the pinned block until the copy is done, then reuses it. A copy from pageable memory
    (`.to("cuda")` of a plain array) is staged through a driver buffer and blocks the host instead;
  - any other device: `.to(device)`.
Tensors already pinned are not copied again (a DataLoader with `pin_memory=True` pins its batches).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch

PINNED_DEVICE_TYPES = ("cuda",)  # where pinned host memory makes a host-to-device copy asynchronous


def pinned(tensor: torch.Tensor) -> torch.Tensor:
    """`tensor` in page-locked host memory (itself when it already is, or is not on the CPU)."""
    if tensor.device.type != "cpu" or tensor.is_pinned():
        return tensor
    return tensor.pin_memory()


def to_device(rows: Iterable[np.ndarray | torch.Tensor], device: str | torch.device) -> tuple[torch.Tensor, ...]:
    """Every array of `rows` as a tensor on `device`, in order (the module docstring says how)."""
    device = torch.device(device)
    tensors = [row if isinstance(row, torch.Tensor) else torch.from_numpy(row) for row in rows]
    if device.type == "cpu":
        return tuple(t.cpu() for t in tensors)
    if device.type in PINNED_DEVICE_TYPES:
        return tuple(pinned(t).to(device, non_blocking=True) for t in tensors)
    return tuple(t.to(device) for t in tensors)
