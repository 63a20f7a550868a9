"""Epoch mode of MixedLoader: which source each row of a step comes from, and which item it reads.

`EpochMixer(sources, p, seed=..., rank=..., world_size=...)` holds, for the sources of one loader
(sorted names, weights > 0):
  - one round_robin.SmoothRoundRobin over rows with weights p (the same on every rank);
  - per source an epoch_order.RankCursor over its `len(source)` items, seeded with
    `source_seed(seed, name)`, reading this rank's positions of each epoch and rolling over on its own.
`assign(B)` gives the source of each of the next B rows, `take(k, count)` source k's next items (the
loader reads them, sources in name order, into the rows that source was assigned: assembly.py).
Its whole position is `state()`: each source's epoch and cursor and the credits
(plain ints). `restore` checks a saved position for consistency before taking it: the credits give
how many rows each source has read after `rows` rows in all, and epoch * items_per_epoch + cursor
must equal that count.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from niels_gpt.sampling import splitmix64
from niels_gpt.training.epoch_order import RankCursor
from niels_gpt.training.round_robin import SmoothRoundRobin

_MASK64 = (1 << 64) - 1


def source_seed(seed: int, name: str) -> int:
    """The seed of source `name`'s epoch orders: splitmix64 of (loader seed xor a digest of the name),
    so two sources with as many items never share an order."""
    name_bits = int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:8], "little")
    return splitmix64((seed ^ name_bits) & _MASK64)


class EpochMixer:
    """Round robin over rows + one RankCursor per source (module docstring)."""

    def __init__(self, sources: Mapping[str, Any], p: Mapping[str, float], *, seed: int, rank: int, world_size: int):
        unfit = [name for name, src in sources.items() if not (hasattr(src, "rows") and hasattr(src, "__len__"))]
        if unfit:
            raise TypeError(
                f"mode='epoch' reads each source as items (len(source), source.rows(ids)), and {unfit} do not "
                "offer that; use mode='random' for them"
            )
        self.sources, self.names = sources, sorted(sources)
        self.p = [p[name] for name in self.names]
        self.seed, self.rank, self.world_size = seed, rank, world_size
        self.round_robin = SmoothRoundRobin(self.p)
        self.cursors = {name: self._cursor(name, 0, 0) for name in self.names}

    def _cursor(self, name: str, epoch: int, cursor: int) -> RankCursor:
        try:
            return RankCursor(
                len(self.sources[name]),
                source_seed(self.seed, name),
                rank=self.rank,
                world_size=self.world_size,
                epoch=epoch,
                cursor=cursor,
            )
        except ValueError as e:
            raise ValueError(f"source {name!r}: {e}") from None

    def assign(self, B: int) -> tuple[np.ndarray, list[int]]:
        """The source index of each of the next B rows (int64 (B,)) and how many rows each source got."""
        which = self.round_robin.assign(B)
        return which, np.bincount(which, minlength=len(self.names)).tolist()

    def take(self, k: int, count: int) -> np.ndarray:
        """The next `count` items of source number k (its cursor moves on)."""
        return self.cursors[self.names[k]].take(count)

    def skip(self, B: int, batches: int) -> None:
        """Move past `batches` batches of B rows without reading a row: the round robin runs, and each
        source's cursor moves by the rows it was assigned."""
        read = np.zeros(len(self.names), dtype=np.int64)
        for _ in range(batches):
            read += np.bincount(self.round_robin.assign(B), minlength=len(self.names))
        for name, rows in zip(self.names, read.tolist()):
            self.cursors[name].skip(rows)

    def epochs(self) -> dict[str, int]:
        """Completed epochs of each source on this rank."""
        return {name: cursor.epoch for name, cursor in self.cursors.items()}

    def state(self) -> dict:
        return {
            "sources": {name: {"epoch": c.epoch, "cursor": c.cursor} for name, c in self.cursors.items()},
            "credits": dict(zip(self.names, self.round_robin.credits)),
        }

    def restore(self, state: Mapping[str, Any], rows: int) -> None:
        """Take the position `state()` saved after `rows` rows in all, once it proves consistent."""
        try:
            credits = [state["credits"][name] for name in self.names]
            saved = {name: (state["sources"][name]["epoch"], state["sources"][name]["cursor"]) for name in self.names}
        except (KeyError, TypeError) as e:
            raise ValueError(f"epoch-mode state lacks {e} (it needs 'credits' and 'sources' of {self.names})") from None
        round_robin = SmoothRoundRobin(self.p, credits=credits)
        cursors = {}
        for name, count in zip(self.names, round_robin.counts(rows)):
            cursor = cursors[name] = self._cursor(name, *saved[name])
            read = cursor.position
            if read != count:
                raise ValueError(
                    f"inconsistent epoch-mode state: source {name!r} at epoch {cursor.epoch}, cursor "
                    f"{cursor.cursor:,} has read {read:,} rows, but its credits say {count:,}"
                )
        self.round_robin, self.cursors = round_robin, cursors
