"""EpochSampler: a seeded, endless, exactly resumable order over a map-style dataset, one rank's share of it.

Epoch e visits the n items once, position j holding item `epoch_order.EpochPermutation(n, seed, e)(j)`
(O(1) memory: nothing with n entries is built). Rank r of W reads positions r, r + W, r + 2W, ... of
every epoch (epoch_order.RankCursor), so ranks are disjoint and together read every item once per
epoch; rank r reads `per_epoch` = ceil((n - r) / W) items an epoch. The iterator never ends: epoch e + 1
follows epoch e (count steps, not epochs). Ranks come from torch.distributed when it is initialized
(`resolve_rank`), else 0 of 1, unless given.

`iter(sampler)` has no side effect: it starts at epoch 0, cursor 0. Its iterator's `state_dict()` is a
fresh dict of ints, {"epoch", "cursor", "fingerprint"}: cursor = the items of that epoch this rank has
read, fingerprint = {version, seed, items, rank, world_size, data} (data: the dataset's `identity`, a
digest of its cache, or None). `load_state_dict` refuses a state of another order with the message
MixedLoader gives (plan.refuse_other_plan) and otherwise continues exactly. torchdata's
StatefulDataLoader saves and restores this state by itself. The main process draws the indices and
workers only read items, so `DataLoader(ds, batch_size=B, sampler=EpochSampler(ds, seed=s),
num_workers=k)` yields the same batches for every k. (Do not pass shuffle=True or a loader generator=:
the sampler is the only source of order.)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sized
from typing import Any

from torch.utils.data import Sampler

from niels_gpt.training.epoch_order import RankCursor
from niels_gpt.training.loader import check_int
from niels_gpt.training.plan import refuse_other_plan

STATE_VERSION = 1  # the layout of an EpochSampler state and the meaning of its positions


def resolve_rank(rank: int | None = None, world_size: int | None = None) -> tuple[int, int]:
    """(rank, world_size): as given; what is not given from torch.distributed when it is initialized,
    else rank 0 of world_size 1."""
    if rank is None or world_size is None:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            rank = dist.get_rank() if rank is None else rank
            world_size = dist.get_world_size() if world_size is None else world_size
    world_size = check_int("world_size", 1 if world_size is None else world_size, 1)
    return check_int("rank", 0 if rank is None else rank, 0, world_size), world_size


class EpochSampler(Sampler[int]):
    """Endless seeded epochs over `data_source` (a sized dataset, or its length), this rank's positions."""

    def __init__(self, data_source: Sized | int, *, seed: int, rank: int | None = None, world_size: int | None = None):
        n = data_source if isinstance(data_source, int) and not isinstance(data_source, bool) else len(data_source)
        self.n = check_int("the number of items", n, 1)
        self.seed = check_int("seed", seed, -(1 << 63))
        self.rank, self.world_size = resolve_rank(rank, world_size)
        self.identity = getattr(data_source, "identity", None)
        self.per_epoch = RankCursor(self.n, self.seed, rank=self.rank, world_size=self.world_size).per_epoch

    def fingerprint(self) -> dict[str, Any]:
        """What a saved position means; a state must carry the same to be loaded."""
        return {
            "version": STATE_VERSION,
            "seed": self.seed,
            "items": self.n,
            "rank": self.rank,
            "world_size": self.world_size,
            "data": self.identity,
        }

    def __iter__(self) -> EpochSamplerIterator:
        return EpochSamplerIterator(self)

    def __repr__(self) -> str:
        return (
            f"EpochSampler({self.n:,} items, seed={self.seed}, rank={self.rank}/{self.world_size}, "
            f"{self.per_epoch:,} per epoch on this rank)"
        )


class EpochSamplerIterator(Iterator[int]):
    """One pass of an EpochSampler: item ids (ints), endless; stateful (module docstring)."""

    def __init__(self, sampler: EpochSampler):
        self.sampler = sampler
        self._cursor = RankCursor(sampler.n, sampler.seed, rank=sampler.rank, world_size=sampler.world_size)

    def __iter__(self) -> EpochSamplerIterator:
        return self

    def __next__(self) -> int:
        return int(self._cursor.take(1)[0])

    @property
    def epoch(self) -> int:
        """The epoch the next item belongs to (= completed epochs on this rank)."""
        return self._cursor.epoch

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self._cursor.epoch, "cursor": self._cursor.cursor, "fingerprint": self.sampler.fingerprint()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if not isinstance(state, Mapping) or not {"epoch", "cursor"} <= set(state):
            raise ValueError(f"not an EpochSampler state (it needs 'epoch' and 'cursor'): {state!r}")
        refuse_other_plan(state.get("fingerprint"), self.sampler.fingerprint())
        epoch = check_int("state['epoch']", state["epoch"], 0)
        cursor = check_int("state['cursor']", state["cursor"], 0, self.sampler.per_epoch)
        s = self.sampler
        self._cursor = RankCursor(s.n, s.seed, rank=s.rank, world_size=s.world_size, epoch=epoch, cursor=cursor)
