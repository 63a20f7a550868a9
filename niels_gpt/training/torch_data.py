"""Map-style `torch.utils.data.Dataset`s over every cache: the items of epoch mode as dict items.

  PretrainWindows("cache/pretrain/wikitext/train", T=...)   stride-T windows of T+1 tokens of a pretrain split
  SFTExamples("cache/sft/oasst1", "train", T=...)           kept SFT examples, one per row, padded
  PackedSFTRows("cache/sft/oasst1", "train", T=..., seed=0)  packed SFT rows (several examples per row)
  ByteWindows("cache/streams", "train", T=...)              stride-T windows of T+1 bytes of every stream

Item i is what the reader's `rows([i])` returns (the items MixedLoader's epoch mode reads: pretrain/
dataset.py, sft/dataset.py, streams/batches.py), as a dict item of (T,) int64 tensors (batch_dict.py:
input_ids, labels, shift_labels, position_ids, and segment_ids for packed rows); `len(ds)` counts the
items. `__getitems__` reads a whole batch of items with one vectorized gather (torch's DataLoader calls
it with the batch's indices); the default collate stacks the items into (B, T) tensors.

`device=..., resident=True` puts the reader's cache in the memory of `device` and makes the items there
(training/resident.py; read them in the main process: num_workers=0).
Each dataset opens its reader (checking the cache, its meta.json and, given, the tokenizer) when built.
It pickles without it (a worker started by spawn or forkserver opens the reader again, lazily, at its
first item, and refuses a cache whose identity has changed since), so memory maps are never copied
into a pickle; forked workers share the parent's. Order and ranks come from the sampler
(samplers.EpochSampler).
"""

from __future__ import annotations

import operator
import os

import numpy as np
from torch.utils.data import Dataset, get_worker_info

from niels_gpt.chat_template import IGNORE_INDEX
from niels_gpt.training import batch_dict

RESIDENT_IN_WORKERS = (
    "resident=True makes batches on the device in the main process, but this dataset is read by DataLoader "
    "workers (each would copy the caches); use num_workers=0, or resident=False with workers"
)


class OpenedWhereUsed:
    """Mixin for datasets that hold open caches (memory maps) in `_opened`: pickles leave them out, and the
    first use where the pickle lands opens them again (`_open()`) and refuses them when `_changes(opened)`
    lists a difference from what was opened when the dataset was built (the caches changed on disk)."""

    _opened = None

    def opened(self):
        """The open caches (opened again after unpickling, and checked to hold the same data)."""
        if self._opened is None:
            opened = self._open()
            changes = self._changes(opened)
            if changes:
                raise ValueError(
                    f"{self!r}: the caches changed on disk since it was built ({'; '.join(changes)}); build it again"
                )
            self._opened = opened
        return self._opened

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_opened"] = None  # memory maps are opened again where the dataset lands
        return state


class _CacheItems(OpenedWhereUsed, Dataset):
    """The items of one reader as dict items; subclasses say how the reader is opened (`_open`, with
    `self.device` and `self.resident`: the reader's cache in the memory of that device, items made there)."""

    device, resident = "cpu", False

    def __init__(self, tokenizer=None):
        reader = self._open(tokenizer)
        self._opened = reader
        self._len = len(reader)
        self.identity = reader.identity
        if not self._len:
            raise ValueError(f"{self!r}: no items for T={self.T}; lower T or build more data")

    def _open(self, tokenizer=None):
        raise NotImplementedError

    def _changes(self, reader) -> list[str]:
        return [] if reader.identity == self.identity else [f"identity: was {self.identity}, is {reader.identity}"]

    @property
    def reader(self):
        """The reader of the cache (pretrain/dataset.py, sft/dataset.py, streams/batches.py)."""
        return self.opened()

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, index) -> dict:
        i = operator.index(index)
        if not 0 <= i < self._len:
            raise IndexError(f"item {i} out of range for {self._len:,} items")
        return batch_dict.items(self._batch(np.array([i], dtype=np.int64)))[0]

    def __getitems__(self, indices) -> list[dict]:
        ids = np.asarray(indices, dtype=np.int64)
        if len(ids) and (ids.min() < 0 or ids.max() >= self._len):
            raise IndexError(f"items must lie in [0, {self._len:,}), got {ids.min()}..{ids.max()}")
        return batch_dict.items(self._batch(ids))

    def _batch(self, ids: np.ndarray) -> dict:
        if self.resident and get_worker_info() is not None:
            raise ValueError(RESIDENT_IN_WORKERS)
        reader = self.reader
        if reader.resident is not None:
            return batch_dict.as_dict(*reader.resident.rows(reader.resident.locate(ids)))
        return batch_dict.as_dict(*reader.rows(ids))


class PretrainWindows(_CacheItems):
    """Stride-T windows of T+1 tokens over the shards of one pretrain split (`shards_dir`)."""

    def __init__(self, shards_dir: str | os.PathLike, *, T: int, tokenizer=None, device="cpu", resident: bool = False):
        self.shards_dir, self.T, self.device, self.resident = str(shards_dir), T, device, resident
        super().__init__(tokenizer)

    def _open(self, tokenizer=None):
        from niels_gpt.pretrain.dataset import PretrainTokenStreamDataset

        options = {"device": self.device, "resident": self.resident}
        return PretrainTokenStreamDataset(self.shards_dir, T=self.T, tokenizer=tokenizer, **options)

    def __repr__(self) -> str:
        return f"PretrainWindows({self.shards_dir!r}, T={self.T})"


class _SFTItems(_CacheItems):
    """The items of one split of an SFT cache (`cache_dir`, e.g. cache/sft/oasst1): padded examples or packed
    rows (`packing`); `truncation` defaults to the cache's."""

    packing = False

    def __init__(self, cache_dir, split: str, *, T: int, seed: int, tokenizer, truncation: str | None, **placement):
        self.cache_dir, self.split, self.T, self.seed, self.truncation = str(cache_dir), split, T, seed, truncation
        self.device, self.resident = placement.get("device", "cpu"), placement.get("resident", False)
        super().__init__(tokenizer)

    def _open(self, tokenizer=None):
        from niels_gpt.sft.dataset import SFTExampleDataset

        return SFTExampleDataset.from_cache_dir(
            self.cache_dir,
            self.split,
            T=self.T,
            tokenizer=tokenizer,
            truncation=self.truncation,
            packing=self.packing,
            seed=self.seed,
            ignore_index=IGNORE_INDEX,
            device=self.device,
            resident=self.resident,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.cache_dir!r}, {self.split!r}, T={self.T})"


class SFTExamples(_SFTItems):
    """The kept examples of one split of an SFT cache, one per row, padded with eot (targets ignored)."""

    def __init__(
        self,
        cache_dir: str | os.PathLike,
        split: str = "train",
        *,
        T: int,
        tokenizer=None,
        truncation: str | None = None,
        device="cpu",
        resident: bool = False,
    ):
        placement = {"device": device, "resident": resident}
        super().__init__(cache_dir, split, T=T, seed=0, tokenizer=tokenizer, truncation=truncation, **placement)


class PackedSFTRows(_SFTItems):
    """The kept examples of one split of an SFT cache packed into rows (sft/packing.py, seeded by `seed`):
    position_ids restart at every example, segment_ids number the examples of a row."""

    packing = True

    def __init__(
        self,
        cache_dir: str | os.PathLike,
        split: str = "train",
        *,
        T: int,
        seed: int = 0,
        tokenizer=None,
        truncation: str | None = None,
        device="cpu",
        resident: bool = False,
    ):
        placement = {"device": device, "resident": resident}
        super().__init__(cache_dir, split, T=T, seed=seed, tokenizer=tokenizer, truncation=truncation, **placement)


class ByteWindows(_CacheItems):
    """Stride-T windows of T+1 bytes over the byte streams of one split in `streams_dir` (e.g. cache/streams):
    `sources` (default: every built, non-empty stream of the split), in sorted name order."""

    def __init__(
        self,
        streams_dir: str | os.PathLike,
        split: str = "train",
        *,
        T: int,
        sources=None,
        device="cpu",
        resident=False,
    ):
        self.streams_dir, self.split, self.T, self.device, self.resident = str(streams_dir), split, T, device, resident
        self.sources = None if sources is None else list(sources)
        super().__init__()

    def _open(self, tokenizer=None):
        from niels_gpt.streams.batches import StreamBatcher, load_stream_cache

        streams = load_stream_cache(self.streams_dir, self.split, self.sources)
        if not streams:
            raise ValueError(f"{self.streams_dir}: no built {self.split} byte stream; build the streams first")
        names = sorted(streams)
        share = {name: 1 / len(names) for name in names}  # required by StreamBatcher, unused by rows()
        return StreamBatcher(streams, p=share, T=self.T, device=self.device, resident=self.resident)

    def __repr__(self) -> str:
        return f"ByteWindows({self.streams_dir!r}, {self.split!r}, T={self.T})"
