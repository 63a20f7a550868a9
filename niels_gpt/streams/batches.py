"""Mixed-source byte batches for byte-level training: `get_batch`, `StreamBatcher`, `load_stream_cache`.

A source is a byte stream (`ByteStream`; `BytesSources` maps names to them, both defined in build.py):
`bytes`, `bytearray`, `memoryview`, a 1-D uint8 numpy array (the `np.memmap`s that `load_stream_cache`
returns) or a 1-D uint8 CPU torch tensor. It is viewed in place, never copied, and must hold T+1
bytes (`build.check_stream_lengths`, the builder's check). A batch row is a window of T+1
consecutive bytes of one source: `x = window[:-1]`, `y = window[1:]`, so `y[:, :-1] == x[:, 1:]`;
values 0..255, dtype int64, shape (B, T).

The mixture contract is the one of every mixed batch in niels_gpt (`niels_gpt.sampling`): `p` maps
source name -> probability, its keys equal the source names, the sum is 1 within 1e-6.

Random draws, in this order, all from `generator` (torch's global RNG when it is None); nothing
else is random, so the same generator state gives the same batch:
  1. `sampling.draw_sources`: one `torch.multinomial(probs, B, replacement=True)` over the sources
     in sorted name order -> the source of every row;
  2. one `torch.randint(0, 2**62, (B,))` -> row i starts at `r[i] % (len(src_i) - T)` in its
     source.
Every start in [0, len(src) - T - 1] is equally likely (the modulo bias is below 2**-32), so every
window of a source is.
A per-row loop of `torch.randint(0, len(src) - T, (1,))` calls gives the same distribution but a
different stream of draws (so different batches for the same seed).

Epoch mode (MixedLoader(mode="epoch")): a `StreamBatcher` is also a sequence of items, the windows
of T+1 bytes at stride T that tile each of its streams in sorted name order
(niels_gpt.token_windows.StrideTiling; `epoch_dropped_bytes` counts the bytes in no window):
`len(batcher)`, `batcher.rows(ids)` -> (x, y) numpy int64. Its own `p` plays no part there: give
MixedLoader one batcher per stream to mix streams by weight. `resident=True` copies the streams into
the memory of `device` once and makes every batch there, the same rows (niels_gpt.training.resident).
`identity` names the data for a resumed loader's check: the sha256 in each stream's .meta.json when it
was memory-mapped from a stream cache (`load_stream_cache`), else its length.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from numpy.lib.stride_tricks import as_strided

from niels_gpt.data.registry import STREAM_SOURCES
from niels_gpt.hashing import sha256_json
from niels_gpt.layout import stream_meta_beside
from niels_gpt.meta import is_built, read_meta
from niels_gpt.sampling import check_mixture, draw_sources
from niels_gpt.streams.build import BytesSources, ByteStream, check_stream_lengths, stream_paths
from niels_gpt.to_device import to_device
from niels_gpt.token_windows import StrideTiling, gather_rows, split_xy

__all__ = ["ByteStream", "BytesSources", "StreamBatcher", "default_p_train", "get_batch", "load_stream_cache"]

_DRAW_HIGH = 1 << 62  # one draw per row, reduced modulo the window count: bias < 2**-32 for streams < 2**30


def default_p_train() -> dict[str, float]:
    """The byte mixture of config_schema.yaml (`streams.p_train`): wiki 0.784, roam 0.196, primer 0.020."""
    from niels_gpt.config import schema_defaults

    return dict(schema_defaults()["streams"]["p_train"])


def _nbytes(src: ByteStream, name: str) -> int:
    if isinstance(src, (bytes, bytearray)):
        return len(src)
    if isinstance(src, memoryview):
        return src.nbytes
    if isinstance(src, np.ndarray):
        if src.dtype != np.uint8 or src.ndim != 1:
            raise ValueError(f"{name}: expected a 1-D uint8 array, got {src.dtype} with shape {src.shape}")
        return src.shape[0]
    if isinstance(src, torch.Tensor):
        if src.dtype != torch.uint8 or src.dim() != 1 or src.device.type != "cpu":
            raise ValueError(
                f"{name}: expected a 1-D uint8 CPU tensor, got {src.dtype} {tuple(src.shape)} on {src.device}"
            )
        return src.shape[0]
    raise TypeError(f"{name}: expected bytes, bytearray, memoryview, uint8 array or tensor, got {type(src).__name__}")


def _windows(src: ByteStream, n: int, T: int) -> np.ndarray:
    """(n - T, T+1) view of `src`: row i is the T+1 bytes starting at i. No copy; only ever read."""
    if isinstance(src, torch.Tensor):
        src = src.numpy()
    if isinstance(src, np.ndarray) and not src.flags.c_contiguous:
        return as_strided(src, shape=(n - T, T + 1), strides=(src.strides[0],) * 2, writeable=False)
    # the ndarray constructor over the buffer: ~10x cheaper than as_strided, matters at B=32
    return np.ndarray((n - T, T + 1), np.uint8, src, 0, (1, 1))


def _draw(windows: list[np.ndarray], p: Mapping[str, float], B: int, generator) -> tuple[np.ndarray, np.ndarray]:
    """(stream index, start) of B windows over the window views of validated sources (sorted name order):
    the two draws of the module docstring."""
    if B < 1:
        raise ValueError(f"B must be >= 1, got {B}")
    _, idx = draw_sources(p, B, generator)
    draws = torch.randint(0, _DRAW_HIGH, (B,), generator=generator).numpy()
    which = idx.numpy()
    if len(windows) == 1:
        return which, draws % windows[0].shape[0]
    return which, draws % np.array([w.shape[0] for w in windows])[which]


def _sample(windows: list[np.ndarray], p: Mapping[str, float], B: int, T: int, device: torch.device, generator):
    """The batch: `_draw`, one gather per source that has rows, one cast for x and y together."""
    return to_device(split_xy(gather_rows(windows, *_draw(windows, p, B, generator))), device)


# `get_batch` is called with the same sources every step: the checks and window views of the last
# call are reused when the very same objects come again. The entry holds the source objects
# themselves, so an `id` can never be recycled while it is cached.
_last_call: tuple | None = None


def _validated_windows(sources: Mapping[str, ByteStream], p: Mapping[str, float], T: int) -> list[np.ndarray]:
    """Window views of the sources in sorted name order, after the mixture and length checks."""
    global _last_call
    key = (tuple(p.items()), tuple(sources.items()), T)
    cached = _last_call
    if cached is not None and len(cached[0]) == len(key[0]) and cached[0] == key[0] and cached[2] == T:
        if len(cached[1]) == len(key[1]) and all(a[0] == b[0] and a[1] is b[1] for a, b in zip(cached[1], key[1])):
            return cached[3]
    names = check_mixture(p, sources.keys(), what="p")
    lengths = [_nbytes(sources[name], name) for name in names]
    if T < 1 or min(lengths) < T + 1:
        check_stream_lengths(dict(zip(names, lengths)), T)
    windows = [_windows(sources[name], n, T) for name, n in zip(names, lengths)]
    _last_call = (key[0], key[1], T, windows)
    return windows


class StreamBatcher:
    """Sources + mixture validated once, ready to sample batches (the same draws as `get_batch`)."""

    def __init__(
        self,
        sources: Mapping[str, ByteStream],
        *,
        p: Mapping[str, float],
        T: int,
        device: str | torch.device = "cpu",
        resident: bool = False,
    ):
        self.T = int(T)
        self._windows = _validated_windows(sources, p, self.T)  # views keep their buffers alive
        self.names = sorted(p)
        self.p = {name: float(p[name]) for name in self.names}
        self.device = torch.device(device)
        self._tiling = StrideTiling([w.shape[0] + self.T for w in self._windows], self.T)
        self.epoch_dropped_bytes = self._tiling.dropped_tokens
        self.identity = sha256_json(
            {"byte_streams": {name: _stream_identity(sources[name], name) for name in self.names}}
        )
        self.resident = None  # resident=True: the streams in the device's memory (training/resident.py)
        if resident:
            from niels_gpt.training.resident import ResidentWindows

            what = f"byte streams {self.names}"
            self.resident = ResidentWindows(
                self._windows, self.T, self.device, what=what, draw=self.draw_windows, locate=self.locate
            )

    def get_batch(self, B: int, generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(x, y), each (B, T) int64 on the device; random draws as the module docstring says."""
        if self.resident is not None:
            return self.resident.rows(self.draw_windows(B, generator))
        return _sample(self._windows, self.p, B, self.T, self.device, generator)

    @property
    def window_views(self) -> list[np.ndarray]:
        """The (n - T, T+1) window view of every stream, in sorted name order (what draw_windows and locate index)."""
        return self._windows

    def draw_windows(self, B: int, generator: torch.Generator | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(stream index, start) of B windows: the draws of get_batch."""
        return _draw(self._windows, self.p, B, generator)

    def __len__(self) -> int:
        """Stride-T windows of T+1 bytes over every stream (the items of an epoch)."""
        return self._tiling.num_windows

    def locate(self, ids) -> tuple[np.ndarray, np.ndarray]:
        """(stream index, start) of stride-T windows `ids` (0..len-1)."""
        return self._tiling.locate(ids)

    def rows(self, ids) -> tuple[np.ndarray, np.ndarray]:
        """(x, y): C-contiguous int64 numpy arrays (len(ids), T) of stride-T windows `ids` (0..len-1)."""
        return split_xy(gather_rows(self._windows, *self.locate(ids)))


def _stream_identity(src: ByteStream, name: str) -> str | int:
    """The sha256 in the .meta.json beside a memory-mapped stream .bin, else the stream's length."""
    meta_path = stream_meta_beside(getattr(src, "filename", None) or "")
    if meta_path and os.path.exists(meta_path):
        return read_meta(meta_path)["sha256"]
    return _nbytes(src, name)


def get_batch(
    sources: Mapping[str, ByteStream],
    *,
    p: Mapping[str, float],
    B: int,
    T: int,
    device: str | torch.device,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample a mixed batch: B windows of T+1 bytes, the source of each row drawn from `p`.

    Raises ValueError if the keys of `p` and `sources` differ (naming the missing and extra ones),
    if `p` does not sum to 1 within 1e-6, or if any source is shorter than T+1 bytes (listing every
    such source with its length). Draw order: see the module docstring.
    """
    return _sample(_validated_windows(sources, p, T), p, B, T, torch.device(device), generator)


def load_stream_cache(
    cache_dir: str | os.PathLike, split: str, sources: list[str] | None = None
) -> dict[str, np.memmap]:
    """Memory-map the streams of one split: {source: read-only uint8 memmap}.

    `sources=None` takes every stream of `split` whose .meta.json exists (written last, so its
    presence means the .bin is complete) and skips those not built (`meta.is_built`: a non-required
    source that had no input) and empty ones; named sources must exist, be built and be non-empty.
    """
    names = (
        sources
        if sources is not None
        else [s for s in STREAM_SOURCES if os.path.exists(stream_paths(cache_dir, s, split)[1])]
    )
    out: dict[str, np.memmap] = {}
    for name in names:
        bin_path, meta_path = stream_paths(cache_dir, name, split)
        if not os.path.exists(meta_path):
            raise FileNotFoundError(
                f"{meta_path}: no stream meta - build it with `snakemake -j4 {bin_path}` or "
                f"`python -m niels_gpt.cache.cli build-streams --source {name}`"
            )
        meta: dict[str, Any] = read_meta(meta_path)
        if not is_built(meta):
            if sources is not None:
                raise ValueError(f"{bin_path}: the {name} {split} stream is not built ({meta.get('reason')})")
            continue
        size = os.path.getsize(bin_path)
        if size != meta.get("n_bytes"):
            raise ValueError(
                f"{bin_path}: {size:,} bytes but its meta says {meta.get('n_bytes')!r}; rebuild the stream"
            )
        if size == 0:
            if sources is not None:
                raise ValueError(f"{bin_path}: the {name} {split} stream is empty")
            continue
        out[name] = np.memmap(bin_path, dtype=np.uint8, mode="r")
    return out
