"""MixedBatches: a MixedLoader's batches as a torch IterableDataset of dict batches, the same for any number
of DataLoader workers, exactly resumable through torchdata's StatefulDataLoader.

`MixedBatches.pretrain(cache_dir, p=..., T=..., B=..., seed=..., mode="random" | "epoch")` (or `.sft`,
`.streams`, or `MixedBatches(open_loader)` over any picklable callable that opens a MixedLoader) yields,
endlessly, batch g of that MixedLoader as a dict batch (batch_dict.py). Each item is a whole batch: use
`DataLoader(ds, batch_size=None, num_workers=k)` (batch_size=B would stack B batches of one worker).

Work split: worker w of k makes global batches w, w + k, w + 2k, ...; the loader asks worker i % k for its
i-th batch and hands batches out in that order (in_order=True, the default), so the sequence is the same
for every k (k = 0: the main process makes every batch). Random mode: batch g is a pure function of
(seed, g, rank) (`MixedLoader.batch_at`). Epoch mode: every worker runs the whole plan (round robin and
cursors, integers) but reads rows only for its own batches (`MixedLoader.skip` for the others').

Handover: a batch made in a worker travels as a handover.Handover, its fields narrowed (uint16 token ids) in one
bytes object that unpickles in the main process into the dict batch itself (no shared-memory blocks, whose file
descriptors the main process would fetch from the worker one handshake each); in the main process
(num_workers=0) the batch is made as a plain dict batch.

Resume: each worker's iterator is stateful, `state_dict()` = {"worker", "num_workers", "loader": its
MixedLoader's state at its next batch (plan fingerprint included)}; StatefulDataLoader keeps one per
worker and counts only the batches it has handed out, so N batches, a save, a new process, a load and M
batches equal N + M batches. A state of another plan is refused with MixedLoader's message
(plan.refuse_other_plan), a state of another worker count with a ValueError (see also
loader_state.load_loader_state, which checks the count before the loader's own asserts).

For a DataLoader that batches items itself, the Hugging Face Trainer's: `mix.rows()` yields the rows of every
batch one at a time (`Row`s, which the Trainer's column filter leaves alone) and a DataLoader with batch_size=B
puts each worker's B consecutive rows, i.e. its whole batch, back together: the same batches for any k
(`hf.RowCollator(B)` makes them the model's keyword arguments; per_device_train_batch_size=B).

The caches are opened, and checked against the tokenizer, when the dataset is built; rank and world_size
are fixed then (samplers.resolve_rank: torch.distributed when it is initialized). The dataset pickles
without its open caches: a worker opens them again at its first batch (spawn, forkserver) and refuses
caches whose plan fingerprint has changed since.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from torch.utils.data import IterableDataset, get_worker_info

from niels_gpt.chat_template import IGNORE_INDEX
from niels_gpt.training.batch_dict import check_ignore_index
from niels_gpt.training.handover import Handover
from niels_gpt.training.loader import MixedLoader
from niels_gpt.training.plan import plan_changes
from niels_gpt.training.samplers import resolve_rank
from niels_gpt.training.schedule import Schedule
from niels_gpt.training.torch_data import RESIDENT_IN_WORKERS, OpenedWhereUsed


def open_streams_loader(
    streams_dir,
    split: str = "train",
    *,
    p,
    T: int,
    device="cpu",
    resident: bool = False,
    **mixing,
) -> MixedLoader:
    """A MixedLoader over the byte streams of one split in `streams_dir` (e.g. cache/streams): one source per
    stream with weight > 0 somewhere in `p` (weights or a schedule; a StreamBatcher of that stream alone, on
    `device`, `resident` there when asked); `mixing`: B, seed, rank, ..."""
    from niels_gpt.streams.batches import StreamBatcher, load_stream_cache

    p = Schedule.of(p).used()
    streams = load_stream_cache(streams_dir, split, p.names)
    sources = {
        name: StreamBatcher({name: stream}, p={name: 1.0}, T=T, device=device) for name, stream in streams.items()
    }
    loader = MixedLoader(sources, p=p, **mixing)
    return loader.made_resident() if resident else loader


class MixedBatches(OpenedWhereUsed, IterableDataset):
    """Endless dict batches of the MixedLoader `open_loader()` opens (module docstring); `opened`: that
    loader, already opened (with checks `open_loader` may leave out, e.g. the tokenizer's)."""

    def __init__(self, open_loader: Callable[[], MixedLoader], *, opened: MixedLoader | None = None):
        self.open_loader = open_loader
        loader = open_loader() if opened is None else opened
        if not isinstance(loader, MixedLoader) or loader.step != 0:
            raise ValueError(f"open_loader must open a MixedLoader at step 0, got {loader!r}")
        self.ignore_index = IGNORE_INDEX if loader.ignore_index is None else check_ignore_index(loader.ignore_index)
        self.fingerprint = loader.fingerprint()
        self.mode, self.B, self.T, self.schedule = loader.mode, loader.B, loader.T, loader.schedule
        self.rank, self.world_size = loader.rank, loader.world_size
        self.resident = loader.assembler.resident
        self._opened = loader

    def _open(self) -> MixedLoader:
        return self.open_loader()

    def _changes(self, loader: MixedLoader) -> list[str]:
        return plan_changes(self.fingerprint, loader.fingerprint())

    @property
    def loader(self) -> MixedLoader:
        """The loader at step 0 whose sources the iterators share."""
        return self.opened()

    def __iter__(self) -> MixedBatchIterator:
        return self.batches()

    def batches(self, *, handover: bool = True) -> MixedBatchIterator:
        """The iterator of this process (a DataLoader worker's share, or every batch); `handover=False`: dict
        batches in a worker too (for code that reads them there, e.g. `rows()`)."""
        info = get_worker_info()  # None in the main process (num_workers=0)
        if info is not None and self.resident:
            raise ValueError(RESIDENT_IN_WORKERS)
        worker, num_workers = (0, 0) if info is None else (info.id, info.num_workers)
        return MixedBatchIterator(self, worker, num_workers, handover=handover)

    def rows(self) -> MixedRows:
        """These batches one row at a time, for a DataLoader with batch_size=B (the Hugging Face Trainer's)."""
        return MixedRows(self)

    def __repr__(self) -> str:
        return (
            f"MixedBatches(mode={self.mode!r}, p={self.schedule!r}, B={self.B}, T={self.T}, "
            f"seed={self.fingerprint['seed']}, rank={self.rank}/{self.world_size})"
        )

    # -- caches on disk: the MixedLoader openers, with rank and world_size resolved here ---------------
    @classmethod
    def pretrain(cls, cache_dir, split: str = "train", *, tokenizer=None, rank=None, world_size=None, **mixing):
        """Batches of `MixedLoader.pretrain(cache_dir, split, p=..., T=..., B=..., seed=..., mode=...)`."""
        return cls._from_opener(
            partial(MixedLoader.pretrain, str(cache_dir), split), tokenizer, rank, world_size, mixing
        )

    @classmethod
    def sft(cls, cache_dir, split: str = "train", *, tokenizer=None, rank=None, world_size=None, **mixing):
        """Batches of `MixedLoader.sft(cache_dir, split, p=..., T=..., B=..., seed=..., packing=..., mode=...)`."""
        return cls._from_opener(partial(MixedLoader.sft, str(cache_dir), split), tokenizer, rank, world_size, mixing)

    @classmethod
    def streams(cls, streams_dir, split: str = "train", *, rank=None, world_size=None, **mixing):
        """Batches of `open_streams_loader(streams_dir, split, p=..., T=..., B=..., seed=..., mode=...)`."""
        opener = partial(open_streams_loader, str(streams_dir), split)
        return cls._from_opener(opener, None, rank, world_size, mixing)

    @classmethod
    def _from_opener(cls, opener, tokenizer, rank, world_size, mixing: dict) -> MixedBatches:
        rank, world_size = resolve_rank(rank, world_size)
        open_loader = partial(opener, rank=rank, world_size=world_size, **mixing)
        checked = {"tokenizer": tokenizer} if tokenizer is not None else {}
        return cls(open_loader, opened=open_loader(**checked))


class Row:
    """One row of a dict batch: `fields` maps each key to a (T,) tensor (not a dict itself, so that the
    Hugging Face Trainer does not drop the keys its model's forward does not name: shift_labels, segment_ids)."""

    __slots__ = ("fields",)

    def __init__(self, fields: dict):
        self.fields = fields

    def __getstate__(self):
        return self.fields

    def __setstate__(self, fields):
        self.fields = fields


class MixedRows(IterableDataset):
    """The rows of a MixedBatches' batches, in order, one `Row` at a time (module docstring)."""

    def __init__(self, batches: MixedBatches):
        self.batches, self.B = batches, batches.B

    def __iter__(self):
        for batch in self.batches.batches(handover=False):
            for i in range(self.B):
                yield Row({key: value[i] for key, value in batch.items()})

    def __repr__(self) -> str:
        return f"{self.batches!r}.rows()"


class MixedBatchIterator:
    """Worker `worker` of the loader's `num_workers` (0: the main process makes every batch): global batches
    worker, worker + stride, ... with stride = max(num_workers, 1); stateful."""

    def __init__(self, dataset: MixedBatches, worker: int, num_workers: int, *, handover: bool = True):
        self.dataset, self.worker, self.num_workers = dataset, worker, num_workers
        self.ignore_index, self.handover = dataset.ignore_index, handover
        self.stride = max(num_workers, 1)
        self.loader = dataset.loader.fresh()
        self.loader.skip(worker)

    def __iter__(self) -> MixedBatchIterator:
        return self

    def __next__(self) -> dict:
        batch = next(self.loader)
        self.loader.skip(self.stride - 1)  # the other workers' batches
        if self.num_workers and self.handover:  # in a worker: the compact handover (module docstring)
            return Handover(
                (batch.x, batch.y, batch.y_masked, batch.segment_ids, batch.position_ids), self.ignore_index
            )
        return batch.as_dict(self.ignore_index)

    def state_dict(self) -> dict[str, Any]:
        return {"worker": self.worker, "num_workers": self.num_workers, "loader": self.loader.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if not isinstance(state, Mapping) or not {"worker", "num_workers", "loader"} <= set(state):
            raise ValueError(f"not a MixedBatches state (it needs 'worker', 'num_workers' and 'loader'): {state!r}")
        if (state["worker"], state["num_workers"]) != (self.worker, self.num_workers):
            raise ValueError(
                f"refusing to resume: this state was saved by worker {state['worker']} of num_workers="
                f"{state['num_workers']}, loaded into worker {self.worker} of {self.num_workers} (each worker keeps "
                f"its own position); build the DataLoader with num_workers={state['num_workers']}"
            )
        self.loader.load_state_dict(state["loader"])
        if (self.loader.step - self.worker) % self.stride:
            raise ValueError(
                f"inconsistent MixedBatches state: worker {self.worker} of {self.num_workers} at batch "
                f"{self.loader.step:,}, which is not one of its batches"
            )
