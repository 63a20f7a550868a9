"""Caches resident in the memory of the training device: each batch made there with a few tensor ops.

`resident=True` on a reader (PretrainTokenStreamDataset, StreamBatcher, SFTExampleDataset), on the
MixedLoader openers and on the map-style datasets of torch_data copies what the reader reads into the
memory of its `device` once, at init, and makes every batch there:
  - windows (pretrain splits, byte streams), `ResidentWindows`: the reader's arrays one after the other in
    one tensor (uint16 ids kept as their int16 bits, bytes as uint8); a batch is the draws or items of the
    host path turned into (array, start) on the host, B starts copied to the device, one index_select of
    the tensor's (n - T, T+1) window view (per source; a loader puts them in place with index_copy_), and
    x and y cast to int64 in two copies (masked back to 0..65535 when some id is >= 32,768);
  - SFT rows, `ResidentSFT`: the tokens, the loss mask (one byte per token) and the kept segments of every
    example (padded: 4 int64 per example) or the pieces of every packed row on the device; a padded row's
    token positions come from its segments (arange, where), a packed row's slots from its pieces
    (repeat_interleave with the output size known, so nothing waits for the device); then one take of the
    tokens and of the mask, x, y, y_masked (and segment_ids, position_ids).
Only the draws (the same torch generator calls as the host path) and the cursors stay on the host; the rows
are the host path's bit for bit, the state and resume are unchanged. Works on any device, "cpu" included.

The MixedLoader openers put the window sources of one loader in one shared tensor (`share_windows`), so a
batch of rows from all of them is one index_select; SFT sources stay one tensor set each.
Before copying, `check_fits` compares the bytes needed with the device's free memory (CUDA:
torch.cuda.mem_get_info; CPU: MemAvailable) less HEADROOM_SHARE of it kept for training, and refuses with one
message giving both: it never falls back to the host path by itself.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

import numpy as np
import torch

from niels_gpt.to_device import to_device

HEADROOM_SHARE = 0.25  # of the free memory left to the model, its activations and optimizer (and other caches)
_COPY_CHUNK = 1 << 26  # elements copied to the device per piece (a memory-mapped shard is never read whole)
_UINT16_MASK = 0xFFFF


def free_bytes(device: torch.device) -> int | None:
    """Free memory of `device` in bytes (CUDA: mem_get_info; CPU: MemAvailable), None where unknown."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    if device.type == "cpu":
        try:
            with open("/proc/meminfo") as f:
                for line in f:
                    if line.startswith("MemAvailable:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        try:
            import os

            return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return None
    return None


def check_fits(needed: int, device: torch.device, what: str) -> None:
    """Refuse, with one message, `needed` bytes that do not fit in `device`'s free memory less the headroom."""
    free = free_bytes(device)
    if free is None:
        return
    room = int(free * (1 - HEADROOM_SHARE))
    if needed > room:
        raise MemoryError(
            f"{what}: resident=True needs {needed:,} bytes on {device} and {free:,} are free ({room:,} once "
            f"{HEADROOM_SHARE:.0%} is left for training); use resident=False (read from the host), fewer or "
            "smaller caches, or a device with more memory"
        )


def _to_device_in_pieces(arrays: Sequence[np.ndarray], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """The 1-D `arrays` one after the other in one tensor on `device`, copied a chunk at a time."""
    flat = torch.empty(sum(len(a) for a in arrays), dtype=dtype, device=device)
    at = 0
    for array in arrays:
        for lo in range(0, len(array), _COPY_CHUNK):
            chunk = np.array(array[lo : lo + _COPY_CHUNK])  # a writable copy of this piece (maps are read-only)
            if chunk.dtype == np.uint16:
                chunk = chunk.view(np.int16)
            elif chunk.dtype == bool:
                chunk = chunk.view(np.uint8)
            flat[at : at + len(chunk)].copy_(torch.from_numpy(chunk).view(dtype))
            at += len(chunk)
    return flat


def _storage_dtype(dtype: np.dtype) -> torch.dtype:
    if dtype == np.uint16:
        return torch.int16  # the same bits; cast to int64 and masked with 0xFFFF when read
    if dtype == np.uint8:
        return torch.uint8
    raise ValueError(f"resident caches hold uint16 ids or uint8 bytes, got {dtype}")


def _as_int64(values: torch.Tensor) -> torch.Tensor:
    out = values.to(torch.int64)
    return out.bitwise_and_(_UINT16_MASK) if values.dtype == torch.int16 else out


class ResidentWindows:
    """The arrays behind a reader's window views on `device`; `rows((view, start))` -> (x, y) there."""

    def __init__(
        self,
        views: Sequence[np.ndarray],
        T: int,
        device: torch.device,
        *,
        what: str,
        draw: Callable,
        locate: Callable,
    ):
        self.T, self.device, self.draw, self.locate = T, torch.device(device), draw, locate
        arrays = [np.lib.stride_tricks.as_strided(v, (v.shape[0] + T,), (v.strides[0],)) for v in views]
        dtype = _storage_dtype(np.result_type(*(v.dtype for v in views)))
        self.nbytes = sum(len(a) for a in arrays) * torch.empty(0, dtype=dtype).element_size()
        check_fits(self.nbytes, self.device, what)
        self.flat = _to_device_in_pieces(arrays, dtype, self.device)
        self.masked = dtype == torch.int16 and bool((self.flat < 0).any())  # ids >= 32,768: int16 bits read negative
        self.first = np.cumsum([0, *(len(a) for a in arrays[:-1])]).astype(np.int64)  # where each array starts
        self.windows = self.flat.unfold(0, T + 1, 1)  # row s: flat[s : s + T + 1]

    def part(self, first: int, count: int, *, draw: Callable, locate: Callable) -> ResidentWindows:
        """This storage seen as arrays first .. first + count - 1 alone (one reader's, in a shared pool)."""
        view = copy.copy(self)
        view.first, view.draw, view.locate = self.first[first : first + count], draw, locate
        return view

    def starts(self, where: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        """Where the windows at (array index, start) `where` begin in the storage (int64, host)."""
        view, start = where
        return self.first[view] + start

    def gather(self, where: tuple[np.ndarray, np.ndarray] | None = None, *, starts=None) -> torch.Tensor:
        """The (B, T+1) rows, as stored, of the windows at (array index, start) `where` (or at storage
        offsets `starts`): the B offsets copied to the device, one index_select."""
        (on_device,) = to_device([self.starts(where) if starts is None else starts], self.device)
        return self.windows.index_select(0, on_device)

    def xy(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x, y: int64 (B, T) cut from stored rows, cast in two copies into one (2, B, T) tensor (the host
        path's layout), masked back to 0..65535 only where the ids need it."""
        B, width = rows.shape
        xy = torch.empty((2, B, width - 1), dtype=torch.int64, device=rows.device)
        xy[0].copy_(rows[:, :-1])
        xy[1].copy_(rows[:, 1:])
        if self.masked:
            xy.bitwise_and_(_UINT16_MASK)
        return xy[0], xy[1]

    def rows(self, where: tuple[np.ndarray, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
        """x, y: int64 (B, T) on the device, of the windows at (array index, start) `where`."""
        return self.xy(self.gather(where))


def share_windows(readers: Sequence, device: torch.device, *, what: str) -> None:
    """Put the arrays of several window readers (one loader's sources) in one tensor on `device` (checked to
    fit as a whole) and give each reader its `resident` part of it, so that a loader gathers a batch of rows
    from all of them with one index_select."""
    if not all(hasattr(reader, "window_views") for reader in readers):
        raise ValueError(f"{what}: only window sources (pretrain splits, byte streams) share one resident tensor")
    views = [view for reader in readers for view in reader.window_views]
    pool = ResidentWindows(views, readers[0].T, device, what=what, draw=None, locate=None)
    at = 0
    for reader in readers:
        count = len(reader.window_views)
        reader.resident = pool.part(at, count, draw=reader.draw_windows, locate=reader.locate)
        at += count


class ResidentSFT:
    """An SFT reader's tokens, loss mask and rows (segments or pieces) on `device`; `rows(ids)` as its rows()."""

    def __init__(self, ds, device: torch.device, *, what: str):
        self.ds, self.device = ds, torch.device(device)
        self.draw, self.locate = ds.draw_items, np.asarray
        self.W = ds.T + 1
        if ds.packed is None:
            tables = {name: getattr(ds.segments, name) for name in ("lo1", "len1", "lo2", "len2")}
        else:
            p = ds.pieces
            tables = {"length": p.length, "x_length": p.x_length, "shift": p.shift, "begin": p.begin}
            tables |= {"segment": p.segment, "opens": p.opens}
        self.nbytes = len(ds.tokens) * 3 + sum(int(a.nbytes) for a in tables.values())  # int16 ids + bool mask
        check_fits(self.nbytes, self.device, what)
        self.tokens = _to_device_in_pieces([ds.tokens], torch.int16, self.device)
        self.mask = _to_device_in_pieces([ds.mask], torch.bool, self.device)
        self.tables = {name: torch.from_numpy(np.ascontiguousarray(a)).to(self.device) for name, a in tables.items()}
        self.slot = torch.arange(self.W, dtype=torch.int64, device=self.device)

    def rows(self, ids) -> tuple[torch.Tensor, ...]:
        """x, y, y_masked (and, packed, segment_ids, position_ids) of items `ids`, on the device."""
        ids = np.asarray(ids, dtype=np.int64)
        if self.ds.packed is None:
            return self._padded(ids)
        return self._packed(ids)

    def _padded(self, ids: np.ndarray):
        (rows,) = to_device([ids], self.device)
        lo1, len1, lo2, len2 = (self.tables[name][rows][:, None] for name in ("lo1", "len1", "lo2", "len2"))
        t = self.slot[None, :]
        valid = t < len1 + len2
        pos = (lo1 + t + torch.where(t >= len1, lo2 - lo1 - len1, 0)) * valid
        return self._xy(pos, valid, None)

    def _packed(self, ids: np.ndarray):
        B, W, start = len(ids), self.W, self.ds.pieces.start
        first, count = start[ids], start[ids + 1] - start[ids]
        ends = np.cumsum(count)
        at = np.repeat(first - (ends - count), count) + np.arange(int(ends[-1]) if B else 0, dtype=np.int64)
        (at,) = to_device([at], self.device)
        piece = {name: table[at] for name, table in self.tables.items()}
        length, in_x = piece["length"], piece["x_length"]
        slots, x_slots = B * W, B * (W - 1)
        valid = torch.repeat_interleave(piece["segment"] > 0, length, output_size=slots).view(B, W)
        pos = torch.repeat_interleave(piece["shift"], length, output_size=slots).view(B, W) + self.slot
        pos *= valid
        begin_of_slot = torch.repeat_interleave(piece["begin"], length, output_size=slots).view(B, W)
        opens = torch.repeat_interleave(piece["opens"], length, output_size=slots).view(B, W)
        first_slot = opens & (begin_of_slot == self.slot)  # an example's first slot: its target is never counted
        segment_ids = torch.repeat_interleave(piece["segment"], in_x, output_size=x_slots).view(B, W - 1)
        position_ids = self.slot[:-1] - torch.repeat_interleave(piece["begin"], in_x, output_size=x_slots).view(
            B, W - 1
        )
        x, y, y_masked = self._xy(pos, valid, first_slot)
        return x, y, y_masked, segment_ids, position_ids

    def _xy(self, pos: torch.Tensor, valid: torch.Tensor, first_slot: torch.Tensor | None):
        seq = torch.where(valid, _as_int64(torch.take(self.tokens, pos)), self.ds.eot_id)
        active = torch.take(self.mask, pos) & valid
        if first_slot is not None:
            active &= ~first_slot
        x, y = seq[:, :-1].contiguous(), seq[:, 1:].contiguous()
        return x, y, torch.where(active[:, 1:], y, self.ds.ignore_index)
