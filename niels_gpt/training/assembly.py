"""How a MixedLoader makes one batch from the source and the position of each row, in one pass.

The loader decides, for the whole batch, which source every row reads (draw_sources or the round robin)
and then which window or item (each source's own draws in random mode, its cursor in epoch mode). What
happens next depends on what its sources offer, the same for every source of a loader:
  - window sources (pretrain splits, byte streams): `window_views` (one (n - T, T+1) window view per
    array), `draw_windows(k, g)` (random) and `locate(items)` (epoch), each giving (view, start) per
    row. The views of all sources are numbered one after the other, so the batch is one (view, start)
    per row: one gather into a (B, T+1) staging buffer kept from batch to batch, then x and y cast to
    int64 in one copy into a fresh tensor (on CUDA a pinned one from torch's caching host allocator,
    copied with non_blocking=True);
  - item sources (SFT): `draw_items(k, g)` (random) and `rows(items)`: one rows() call per source, its
    arrays written into the batch's rows in numpy, one conversion at the end;
  - resident sources (`resident=True`: the caches in the memory of the device, resident.py): each
    source's rows made on the device, put in place with one index_copy_ per field;
  - anything else (a source with get_batch alone): each source's get_batch, scattered with torch.
No Python runs per row; the work per batch is a few numpy calls per source (and per array a window
source has). The rows are the ones each source's own get_batch / rows() would give (tested bit for bit).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from niels_gpt.to_device import PINNED_DEVICE_TYPES, to_device
from niels_gpt.token_windows import gather_rows, xy_view

WINDOW_METHODS = ("window_views", "locate", "draw_windows")
ITEM_METHODS = ("rows", "draw_items")


def _offers(sources, names: Sequence[str]) -> bool:
    return all(all(hasattr(src, name) for name in names) for src in sources)


def host_tensors(shapes: Sequence[tuple], dtypes: Sequence[torch.dtype], device: torch.device) -> list[torch.Tensor]:
    """Empty CPU tensors to fill before they go to `device`: pinned where copies from pinned memory are
    asynchronous (torch's caching host allocator reuses each block once its copy is done)."""
    pin = device.type in PINNED_DEVICE_TYPES and torch.cuda.is_available()
    return [torch.empty(shape, dtype=dtype, pin_memory=pin) for shape, dtype in zip(shapes, dtypes)]


class Assembler:
    """The batches of one loader's sources (in name order), B rows of T tokens on `device`."""

    def __init__(self, sources: Mapping[str, object], *, B: int, T: int, device: torch.device):
        self.names, self.sources = list(sources), list(sources.values())
        self.B, self.T, self.device = B, T, torch.device(device)
        self.resident = all(getattr(src, "resident", None) is not None for src in self.sources)
        self.windows = not self.resident and _offers(self.sources, WINDOW_METHODS)
        self.items = not self.resident and not self.windows and _offers(self.sources, ITEM_METHODS)
        self.drawn: list | None = None  # the last random batch's draws (random())
        if self.windows:
            counts = [len(src.window_views) for src in self.sources]
            self.views = [view for src in self.sources for view in src.window_views]
            self.first_view = np.cumsum([0, *counts[:-1]]).tolist()  # number of each source's first view
            dtype = np.result_type(*(view.dtype for view in self.views))
            self.staging = np.empty((B, T + 1), dtype=dtype)  # rows of several views are gathered here

    # -- where each row reads -------------------------------------------------------------------
    @staticmethod
    def _places(which: np.ndarray, counts: Sequence[int], place) -> list[tuple]:
        """[(k, rows, place(k, count))] for every source k with rows, in order (rows None: every row)."""
        B = len(which)
        if B in counts:
            k = counts.index(B)
            return [(k, None, place(k, B))]
        return [(k, np.flatnonzero(which == k), place(k, count)) for k, count in enumerate(counts) if count]

    def draw(self, k: int, count: int, generator: torch.Generator):
        """Where `count` rows of source k read, drawn from `generator` (random mode): (array, start) arrays for
        window sources, item numbers for item sources; None for sources that only have get_batch."""
        source = self.sources[k]
        if self.resident:
            return source.resident.draw(count, generator)
        if self.windows:
            return source.draw_windows(count, generator)
        if self.items:
            return source.draw_items(count, generator)
        return None

    def random(self, which: np.ndarray, counts: Sequence[int], generator: torch.Generator) -> tuple | None:
        """The tensors of a random-mode batch (rows drawn from `generator` source by source, in order),
        or None for sources that only have get_batch (the loader scatters those). `self.drawn`: the
        [(k, rows, where)] of the draws (what the ledger records), None for get_batch sources."""
        sources, self.drawn = self.sources, None
        if self.resident:
            places = self.drawn = self._places(which, counts, lambda k, n: sources[k].resident.draw(n, generator))
            return self._resident(places)
        if self.windows:
            places = self.drawn = self._places(which, counts, lambda k, n: sources[k].draw_windows(n, generator))
            return self._windows(places)
        if self.items:
            places = self.drawn = self._places(which, counts, lambda k, n: sources[k].draw_items(n, generator))
            return self._items(places)
        return None

    def epoch(self, which: np.ndarray, counts: Sequence[int], take) -> tuple:
        """The tensors of an epoch-mode batch; `take(k, count)`: source k's next items."""
        sources = self.sources
        if self.resident:
            return self._resident(self._places(which, counts, lambda k, n: sources[k].resident.locate(take(k, n))))
        if self.windows:
            return self._windows(self._places(which, counts, lambda k, n: sources[k].locate(take(k, n))))
        return self._items(self._places(which, counts, take))

    # -- gathering -------------------------------------------------------------------------------
    def _windows(self, places: list) -> tuple[torch.Tensor, torch.Tensor]:
        if places[0][1] is None:
            k, _, (view, start) = places[0]
            view = view + self.first_view[k] if self.first_view[k] else view
        else:
            view, start = np.empty(self.B, dtype=np.int64), np.empty(self.B, dtype=np.int64)
            for k, rows, (v, s) in places:
                view[rows], start[rows] = v + self.first_view[k], s
        rows = gather_rows(self.views, view, start, out=None if len(self.views) == 1 else self.staging)
        (xy,) = host_tensors([(2, self.B, self.T)], [torch.int64], self.device)
        np.copyto(xy.numpy(), xy_view(rows))
        xy = xy if self.device.type == "cpu" else xy.to(self.device, non_blocking=True)
        return xy[0], xy[1]

    def _items(self, places: list) -> tuple[torch.Tensor, ...]:
        if places[0][1] is None:
            k, _, items = places[0]
            return to_device(self.sources[k].rows(items), self.device)
        out = arrays = None
        for k, rows, items in places:
            part = self.sources[k].rows(items)
            if arrays is None:
                shapes = [(self.B, *a.shape[1:]) for a in part]
                out = host_tensors(shapes, [torch.from_numpy(a[:0]).dtype for a in part], self.device)
                arrays = [t.numpy() for t in out]
            elif len(part) != len(arrays):
                raise ValueError(
                    f"source {self.names[k]!r} returned {len(part)} arrays from rows(), the others {len(arrays)}"
                )
            for dst, src in zip(arrays, part):
                dst[rows] = src
        return to_device(out, self.device)

    def _resident(self, places: list) -> tuple[torch.Tensor, ...]:
        if places[0][1] is None:
            k, _, where = places[0]
            return self.sources[k].resident.rows(where)
        residents = [self.sources[k].resident for k, _, _ in places]
        if all(hasattr(r, "gather") for r in residents) and len({id(r.windows) for r in residents}) == 1:
            starts = np.empty(self.B, dtype=np.int64)  # windows in one shared tensor: one gather, one cast
            for (_, rows, where), resident in zip(places, residents):
                starts[rows] = resident.starts(where)
            return residents[0].xy(residents[0].gather(starts=starts))
        if all(hasattr(r, "gather") for r in residents):  # windows: rows as stored, then one cast for the batch
            dtype = max((r.flat.dtype for r in residents), key=lambda d: torch.empty(0, dtype=d).element_size())
            buf = torch.empty((self.B, self.T + 1), dtype=dtype, device=residents[0].flat.device)
            for (_, rows, where), resident in zip(places, residents):
                buf.index_copy_(0, to_device([rows], buf.device)[0], resident.gather(where).to(dtype))
            masked = max(residents, key=lambda r: r.masked)  # any source with ids >= 32,768 masks the batch
            return masked.xy(buf)
        out = None
        for (_, rows, where), resident in zip(places, residents):
            part = resident.rows(where)
            if out is None:
                out = [torch.empty((self.B, *t.shape[1:]), dtype=t.dtype, device=t.device) for t in part]
            (dst_rows,) = to_device([rows], out[0].device)
            for dst, src in zip(out, part):
                dst.index_copy_(0, dst_rows, src)
        return tuple(out)


def scatter_batches(parts: Mapping[int, tuple], which: np.ndarray, B: int, T: int) -> list[torch.Tensor]:
    """The batch of sources that only have get_batch: source k's tensors `parts[k]` into the rows that drew k."""
    out = None
    for k, part in parts.items():
        if len(part[0]) == B:
            return list(part)
        if out is None:
            out = [torch.empty((B, T), dtype=t.dtype, device=t.device) for t in part]
        (rows,) = to_device([np.flatnonzero(which == k)], out[0].device)
        for dst, src in zip(out, part):
            dst[rows] = src
    return out
