"""Epoch mode of MixedLoader: which source each row of a step comes from, and which item it reads.

`EpochMixer(sources, schedule, seed=..., rank=..., world_size=...)` holds, for the sources of one loader
(sorted names; the schedule may give some of them weight 0 throughout, none other a weight):
  - one round_robin.ScheduledRoundRobin over rows with the weights of each step (the same on every rank);
  - per source an epoch_order.RankCursor over its `len(source)` items, seeded with
    `source_seed(seed, name)`, reading this rank's positions of each epoch and rolling over on its own.
`assign(B, step)` gives the source of each of the B rows of batch `step`, `take(k, count)` source k's next
items (the loader reads them, sources in name order, into the rows that source was assigned: assembly.py).
A source's cursor moves only when it reads, so its epoch order continues across weight changes (a weight
of 0 pauses it). Its whole position is `state()`: each source's epoch and cursor and the credits over
their unit (plain ints). `restore` checks a saved position for consistency before taking it: the rows
each source is owed after `steps` batches (B * schedule.target) less its credits is what it has read,
and epoch * items_per_epoch + cursor must equal that count. A source the state does not name (its weight
was 0 so far) starts at epoch 0, cursor 0. Every batch (read or skipped) goes into the ledger (ledger.py);
`restore` replays the state's `history` (the weights every step so far had) from batch 0 (round robin and
cursors, no row read, `skip`: SKIP_CHUNK steps at a time in numpy, ~4 us a batch at B=64 with fixed weights and
~5 on a ramp, i.e. 4-5 s per 10^6 batches on one core, mostly the epoch permutation of 64 items a batch and
hashing 1 KB a batch) and refuses a state whose ledger or position the replay does not reproduce.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import numpy as np

from niels_gpt.sampling import splitmix64
from niels_gpt.training.epoch_order import RankCursor
from niels_gpt.training.ledger import Ledger, first_parting, name_id, refusal
from niels_gpt.training.round_robin import ScheduledRoundRobin
from niels_gpt.training.schedule import Schedule

_MASK64 = (1 << 64) - 1
SKIP_CHUNK = 4096  # steps skip() assigns, reads and hashes at once: 4 MB of records at B = 64
SMALL_SKIP = 16  # fewer steps than this are skipped one by one (the chunked path costs ~50-100 us to set up)


def source_seed(seed: int, name: str) -> int:
    """The seed of source `name`'s epoch orders: splitmix64 of (loader seed xor a digest of the name),
    so two sources with as many items never share an order."""
    name_bits = int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:8], "little")
    return splitmix64((seed ^ name_bits) & _MASK64)


class EpochMixer:
    """Round robin over rows + one RankCursor per source (module docstring)."""

    def __init__(self, sources: Mapping[str, Any], schedule, *, seed: int, rank: int, world_size: int):
        unfit = [name for name, src in sources.items() if not (hasattr(src, "rows") and hasattr(src, "__len__"))]
        if unfit:
            raise TypeError(
                f"mode='epoch' reads each source as items (len(source), source.rows(ids)), and {unfit} do not "
                "offer that; use mode='random' for them"
            )
        schedule = Schedule.of(schedule)
        if schedule.names != sorted(sources):  # over every source, some perhaps at weight 0 throughout
            schedule = Schedule(schedule.breakpoints, names=list(sources))
        self.sources, self.names, self.schedule = sources, list(schedule.names), schedule
        self.seed, self.rank, self.world_size = seed, rank, world_size
        self.round_robin = ScheduledRoundRobin(schedule)
        self.cursors = {name: self._cursor(name, 0, 0) for name in self.names}
        self.ledger, self._taken = Ledger(anchors=schedule.steps), []
        self._ids = np.array([name_id(name) for name in self.names], dtype=np.int64)

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

    def assign(self, B: int, step: int) -> tuple[np.ndarray, list[int]]:
        """The source index of each of the B rows of batch `step` (int64 (B,)) and how many rows each source got."""
        which = self.round_robin.assign(B, step)
        self._taken = []
        return which, np.bincount(which, minlength=len(self.names)).tolist()

    def take(self, k: int, count: int) -> np.ndarray:
        """The next `count` items of source number k (its cursor moves on)."""
        items = self.cursors[self.names[k]].take(count)
        self._taken.append(items)
        return items

    def record(self, step: int, which: np.ndarray) -> None:
        """Batch `step`, assigned `which` and read through take(), into the ledger."""
        self.ledger.add(step, self._ids[which], self._taken)  # take() runs in name order

    def skip(self, B: int, step: int, batches: int) -> None:
        """Move past `batches` batches of B rows from batch `step` on without reading a row: the round robin
        runs, each source's cursor gives the items it would read, and the ledger records them. Vectorized over
        SKIP_CHUNK steps at a time: the round robin's rows of the whole chunk (ScheduledRoundRobin.assign_many),
        each source's items of the chunk in one take, the records of the chunk built in numpy and hashed with
        one update per stretch between kept digests (the same bytes batch by batch recording gives); fewer than
        SMALL_SKIP steps one by one."""
        if batches < SMALL_SKIP:  # a DataLoader worker passing the other workers' batches: step by step is cheaper
            for s in range(step, step + batches):
                which, counts = self.assign(B, s)
                for k, count in enumerate(counts):
                    if count:
                        self.take(k, count)
                self.record(s, which)
            return
        K = len(self.names)
        for first in range(step, step + batches, SKIP_CHUNK):
            count = min(SKIP_CHUNK, step + batches - first)
            which = self.round_robin.assign_many(B, first, count)  # (count, B)
            records = np.empty((count, 2 * B), dtype=np.int64)
            np.take(self._ids, which, out=records[:, :B])
            if K == 1:
                records[:, B:] = self.cursors[self.names[0]].take(count * B).reshape(count, B)
            else:  # each step's items in source order, each source's in the order it takes them
                ordered = np.sort(which, axis=1, kind="stable")
                items = records[:, B:]
                totals = np.bincount(which.ravel(), minlength=K).tolist()
                for k, total in enumerate(totals):
                    if total:
                        items[ordered == k] = self.cursors[self.names[k]].take(total)
            self.ledger.add_records(records, 16 * B)

    def epochs(self) -> dict[str, int]:
        """Completed epochs of each source on this rank."""
        return {name: cursor.epoch for name, cursor in self.cursors.items()}

    def state(self) -> dict:
        credits, unit = self.round_robin.position()
        return {
            "sources": {name: {"epoch": c.epoch, "cursor": c.cursor} for name, c in self.cursors.items()},
            "credits": dict(zip(self.names, credits)),
            "credit_unit": unit,
            "ledger": self.ledger.state(),
            "history": self.schedule.state(),  # the weights every step so far had (schedule edits spliced in)
        }

    def restore(self, state: Mapping[str, Any], B: int, steps: int, future: Schedule) -> None:
        """Take the position `state()` saved after `steps` batches of B rows, once it proves consistent and
        replaying its history from batch 0 gives its ledger and its position; from there on the weights
        are `future`'s."""
        try:
            history = Schedule.of(state["history"])
            past = history.spliced(history, steps, self.names)
            effective = history.spliced(future, steps, self.names)
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(
                f"refusing to resume: the state's schedule history does not fit this loader ({e})"
            ) from None
        try:
            saved_credits, unit = state["credits"], state["credit_unit"]
            credits = [saved_credits.get(name, 0) for name in self.names]
            sources = state["sources"]
            saved = {
                name: (sources[name]["epoch"], sources[name]["cursor"]) if name in sources else (0, 0)
                for name in self.names
            }
        except (KeyError, TypeError, AttributeError) as e:
            raise ValueError(
                f"not an epoch-mode state ({type(e).__name__}: {e}; it needs 'credits' and 'sources' keyed by "
                f"{self.names} and 'credit_unit')"
            ) from None
        ints = [unit, *credits, *(v for pair in saved.values() for v in pair)]
        if any(isinstance(c, bool) or not isinstance(c, int) for c in ints) or unit < 1 or sum(credits) != 0:
            raise ValueError(
                f"epoch-mode state: credits {credits} over unit {unit!r} and positions {saved} must be ints, the "
                "credits summing to 0"
            )
        owed = [B * t for t in past.target(steps)]
        cursors = {}
        for name, due, credit in zip(self.names, owed, credits):
            cursor = cursors[name] = self._cursor(name, *saved[name])
            count = due - Fraction(credit, unit)
            if cursor.position != count:
                raise ValueError(
                    f"inconsistent epoch-mode state: source {name!r} at epoch {cursor.epoch}, cursor "
                    f"{cursor.cursor:,} has read {cursor.position:,} rows, but its credits say {count}"
                )
        replay = self.replay(B, steps, past, watch=Ledger.watched(state.get("ledger")))
        parting = first_parting(state.get("ledger"), replay.ledger)
        if parting:
            raise ValueError(refusal(parting))
        positions = {n: (c.epoch, c.cursor) for n, c in replay.cursors.items()}
        replay_credits, replay_unit = replay.round_robin.position()
        saved_position = {n: saved.get(n, (0, 0)) for n in positions}
        mine = (positions, dict(zip(replay.names, replay_credits)), replay_unit)
        if mine != (saved_position, {n: saved_credits.get(n, 0) for n in replay.names}, unit):
            raise ValueError(
                f"refusing to resume: the state's position is not where its history ends (replayed: positions "
                f"{positions}, credits {mine[1]} over {replay_unit}; state: {saved_position}, {saved_credits} "
                f"over {unit})"
            )
        self.schedule = effective
        self.round_robin, self.cursors = ScheduledRoundRobin(effective, credits, unit), cursors
        self.ledger = replay.ledger
        self.ledger.anchor(effective.steps)

    def replay(self, B: int, steps: int, past: Schedule, watch=()) -> EpochMixer:
        """A new mixer over these sources run through `steps` batches of schedule `past` (no row is read); its
        ledger keeps digests after the batch counts in `watch` too (a saved ledger's)."""
        mixer = EpochMixer(self.sources, past, seed=self.seed, rank=self.rank, world_size=self.world_size)
        mixer.ledger = Ledger(anchors=mixer.schedule.steps, watch=watch)
        mixer.skip(B, 0, steps)
        return mixer
