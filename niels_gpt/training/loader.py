"""MixedLoader: batches mixed from several caches by weight, deterministic, exactly resumable, sharded
by rank - the training-time loader.

`MixedLoader(sources, p=..., B=..., seed=..., rank=0, world_size=1, mode="random")` is an endless
iterator of `Batch`es. `p` is the mixture: fixed weights {source: weight}, or a schedule
[(step, {source: weight}), ...], linear between breakpoints and constant after the last (schedule.py);
fixed weights are the schedule [(0, p)] and give the same batches. A source is anything with
`get_batch(*, B, generator)` returning (x, y) (PretrainTokenStreamDataset, StreamBatcher), (x, y, y_masked)
(SFTExampleDataset) or (x, y, y_masked, segment_ids, position_ids) (SFTExampleDataset(packing=True)), each
(B, T); all sources of one loader must return the same fields with the same T and device (so packed and
padded SFT sources are not mixed: `MixedLoader.sft(..., packing=True)` packs them all), and SFT sources the
same ignore_index (`loader.ignore_index`, for the loss). What the sources must share is checked once (sources.py).
Sources with weight 0 at every step are dropped before anything else (never read, not part of `names`),
so adding a zero-weight source never changes a batch.

mode="random": every batch is drawn independently, with replacement: batch number `step` on rank `r` is
a pure function of (seed, step, r), the schedule and the sources (random_mixer.py: a generator seeded with
derive_seed(seed, step, rank) draws the source of every row, then each source's rows in name order).
Ranks sample independently; there is no epoch.

mode="epoch": every item of a source is read once per epoch of that source. Each source is then
also a sequence of items: `len(source)` and `source.rows(ids)` -> the tuple get_batch returns, as
numpy arrays, for items `ids` (stride-T windows of a pretrain split or a byte stream, kept SFT
examples, packed SFT rows). For each step:
  1. round_robin.ScheduledRoundRobin assigns the B rows to sources, so that after any number of steps
     each source has read B times the sum of its weights over those steps, within 1 row;
  2. each source with k rows reads its next k items: epoch_order.RankCursor over the seeded order
     of its epochs (seed `epoch_mixer.source_seed(seed, name)`), this rank taking positions rank, rank +
     world_size, ...; a source whose epoch ends starts its next one (sources roll over on their own);
  3. `source.rows(items)` fills, in order, the batch rows that source was assigned.
Every rank runs the same round robin, so ranks read the same number of rows of each source per step
from disjoint positions, and together read every item once per epoch. `Batch.epochs` and the state
count each source's completed epochs (on this rank).
In both modes the rows are read as one batch (training/assembly.py): window sources give (array, start)
per row and the whole batch is one gather and one cast; SFT sources one rows() call each. The rows are
those of each source's own get_batch / rows(), bit for bit.

Resume: `state_dict()` holds the next step, the plan fingerprint (niels_gpt.training.plan: seed, schedule,
B, T, mode, rank, world_size, state version, each source's cache identity) and, in epoch mode, each
source's epoch and cursor and the round-robin credits. `load_state_dict` refuses a state of another
plan with one message naming what differs, and a schedule whose breakpoints before the saved step differ
from the saved one's with one naming the first that does; breakpoints from the saved step on may be added,
moved or removed (a ramp under way redirected, a new source added), and the batches from there on take the
new schedule's weights (the state keeps the weights every step so far had: `history`). The state also
carries the ledger (training/ledger.py), a running digest of what every batch read (epoch mode: each row's
source and item; random mode: each row's source and its window's shard and start, or its item), with, in random
mode, the rank that recorded it; loading replays the history from step 0 without reading a row (random mode: the
saving rank's draws, so any rank loads any rank's state) and refuses one it does not reproduce (other caches,
other code, a tampered state) naming the batch where the two part (ledger.py: exact near step 0, the
schedule's breakpoints and the save, else the range between two marks). Otherwise it continues exactly: the
restored loader yields the batches the original would have yielded next (same caches, same torch version).
`skip(n)` moves past n batches without reading a row (what the workers of training.mixture do), and
`Batch.as_dict()` is a batch under the names of training.batch_dict (input_ids, labels, ...).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from functools import partial
from typing import Any

import numpy as np
import torch

from niels_gpt.sampling import derive_seed
from niels_gpt.training import random_mixer
from niels_gpt.training.assembly import Assembler, scatter_batches
from niels_gpt.training.batch_dict import Batch
from niels_gpt.training.caches import FromCaches
from niels_gpt.training.epoch_mixer import EpochMixer
from niels_gpt.training.ledger import Ledger, batch_digest, name_id, replay_digests
from niels_gpt.training.plan import STATE_VERSION, refuse_other_plan
from niels_gpt.training.random_mixer import draw_rows
from niels_gpt.training.schedule import Schedule
from niels_gpt.training.sources import FIELDS, check_same_tokenizer, common_ignore_index, probe

__all__ = ["MODES", "Batch", "MixedLoader", "check_int", "check_names", "draw_rows"]

MODES = ("random", "epoch")


def check_int(name: str, value, low: int, high: int | None = None) -> int:
    """`value` if it is an int (not a bool) with low <= value (< high), else one ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value >= high):
        bound = f"{low} <= {name} < {high}" if high is not None else f"{name} >= {low}"
        raise ValueError(f"{name} must be an int with {bound}, got {value!r}")
    return value


def check_names(schedule: Schedule, sources: Mapping[str, Any]) -> None:
    """Every source named by the schedule and every name a source, else one error saying which."""
    unknown = sorted(set(schedule.mentioned) - set(sources))
    missing = sorted(set(sources) - set(schedule.mentioned))
    if unknown or missing:
        raise ValueError(
            f"loader mixture p names sources that are not available: {unknown}; sources missing from it: "
            f"{missing} (available: {sorted(sources)})"
        )


class MixedLoader(FromCaches):
    """Endless deterministic batches over `sources` mixed by `p`; resumable, sharded by rank."""

    def __init__(
        self,
        sources: Mapping[str, Any],
        *,
        p,
        B: int,
        seed: int,
        rank: int = 0,
        world_size: int = 1,
        mode: str = "random",
    ):
        self.schedule = Schedule.of(p)
        check_names(self.schedule, sources)
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.mode = mode
        self.B = check_int("B", B, 1)
        self.seed = check_int("seed", seed, -(1 << 63))
        self.world_size = check_int("world_size", world_size, 1)
        self.rank = check_int("rank", rank, 0, self.world_size)
        self.schedule = self.schedule.used()
        self.names = list(self.schedule.names)
        self.p = dict(self.schedule.at(0))  # the weights at step 0 (the whole mixture when p is fixed)
        self.sources = {name: sources[name] for name in self.names}
        self.arity, self.T, self.device = probe(self.sources)
        check_same_tokenizer(self.sources)
        self.ignore_index = common_ignore_index(self.sources)
        self.identities = {name: getattr(src, "identity", None) for name, src in self.sources.items()}
        self.assembler = Assembler(self.sources, B=self.B, T=self.T, device=self.device)
        self.step = 0
        self._index = {name: k for k, name in enumerate(self.names)}
        self._ids = np.array([name_id(name) for name in self.names], dtype=np.int64)
        self.ledger = Ledger(anchors=self.schedule.steps) if mode == "random" else None  # epoch mode: the mixer's
        self._generators = threading.local()
        self.history = self.schedule  # random mode: the weights every step so far had (resumes splice in edits)
        self.mixer = (
            EpochMixer(self.sources, self.schedule, seed=self.seed, rank=self.rank, world_size=self.world_size)
            if mode == "epoch"
            else None
        )

    # -- batches -------------------------------------------------------------------------------
    def batch_at(self, step: int) -> Batch:
        """Batch number `step` of this rank (random mode); does not move the loader."""
        return self._random_batch(step)[0]

    def _random_batch(self, step: int) -> tuple[Batch, np.ndarray, list | None]:
        """Random-mode batch `step`, the source of each row (indices into names) and its draws [(k, rows, where)]
        (None for sources with get_batch alone)."""
        check_int("step", step, 0)
        if self.mode == "epoch":
            raise ValueError(
                "batch_at is for mode='random': an epoch-mode batch depends on every batch before it; "
                "use next(loader), and state_dict() / load_state_dict() to resume"
            )
        B = self.B
        g = getattr(self._generators, "g", None)
        if g is None:  # one per thread, reseeded for every batch (the state of a fresh one; ~2 us less a batch)
            g = self._generators.g = torch.Generator()
        g.manual_seed(derive_seed(self.seed, step, self.rank))
        idx = draw_rows(self.schedule, step, B, g)
        which = idx.numpy()
        counts = np.bincount(which, minlength=len(self.names)).tolist()
        out = self.assembler.random(which, counts, g)
        if out is None:  # sources with get_batch alone
            parts = {}
            for k, count in enumerate(counts):
                if count:
                    name = self.names[k]
                    parts[k] = self.sources[name].get_batch(B=count, generator=g)
                    if len(parts[k]) != self.arity:
                        raise ValueError(f"source {name!r} returned {len(parts[k])} tensors, earlier {self.arity}")
            out = scatter_batches(parts, which, B, self.T)
        elif len(out) != self.arity:
            raise ValueError(f"sources returned {len(out)} tensors, {self.arity} from get_batch")
        return Batch(**dict(zip(FIELDS, out)), source=idx, step=step), which, self.assembler.drawn

    def random_draws(self, step: int, *, rank: int | None = None, schedule: Schedule | None = None, generator=None):
        """(names, which, [(name, where)]) of random-mode batch `step` on `rank` (default: this loader's) under
        `schedule` (default: this loader's), without reading a row (random_mixer.random_draws)."""
        rank, schedule = self.rank if rank is None else rank, self.schedule if schedule is None else schedule
        return random_mixer.random_draws(self, step, rank=rank, schedule=schedule, generator=generator)

    def batch_digests(self, first: int, last: int, *, rank: int, schedule: Schedule) -> bytes:
        """The ledger's 16-byte record of random-mode batches first..last-1 (random_mixer.batch_digests)."""
        return random_mixer.batch_digests(self, first, last, rank=rank, schedule=schedule)

    def _epoch_batch(self) -> Batch:
        """The next epoch-mode batch (epoch_mixer.py); advances the round robin and the cursors."""
        which, counts = self.mixer.assign(self.B, self.step)
        tensors = self.assembler.epoch(which, counts, self.mixer.take)
        self.mixer.record(self.step, which)
        if len(tensors) != self.arity:
            raise ValueError(f"sources returned {len(tensors)} arrays from rows(), {self.arity} from get_batch")
        return Batch(
            **dict(zip(FIELDS, tensors)), source=torch.from_numpy(which), step=self.step, epochs=self.mixer.epochs()
        )

    def skip(self, batches: int) -> None:
        """Move past the next `batches` batches without reading them, recording them in the ledger: random mode
        makes their draws (~30-60 us a batch one by one; from 64 batches on ~10 us, random_replay.py), epoch mode
        runs the round robin and moves each source's cursor by the rows it was assigned (~4 us a batch from 16 on)."""
        check_int("batches", batches, 0)
        if self.mixer is not None:
            self.mixer.skip(self.B, self.step, batches)
        else:
            job = partial(self.batch_digests, rank=self.rank, schedule=self.history)
            self.ledger.add_digests(replay_digests(job, self.step, self.step + batches))
        self.step += batches

    def fresh(self) -> MixedLoader:
        """A new loader over the same sources and plan, at step 0 (its own position, round robin and cursors)."""
        return MixedLoader(
            self.sources,
            p=self.schedule,
            B=self.B,
            seed=self.seed,
            rank=self.rank,
            world_size=self.world_size,
            mode=self.mode,
        )

    def __iter__(self) -> MixedLoader:
        return self

    def __next__(self) -> Batch:
        if self.mode == "epoch":
            batch = self._epoch_batch()
        else:
            batch, which, drawn = self._random_batch(self.step)
            wheres = [where for _, _, where in drawn] if drawn is not None else ()
            self.ledger.add_digest(batch_digest(self._ids[which], wheres))
        self.step += 1
        return batch

    # -- resume --------------------------------------------------------------------------------
    def fingerprint(self) -> dict:
        """What the saved position means (niels_gpt.training.plan); rank only in epoch mode."""
        return {
            "version": STATE_VERSION,
            "mode": self.mode,
            "seed": self.seed,
            "schedule": self.schedule.state(),
            "B": self.B,
            "T": self.T,
            "rank": self.rank if self.mode == "epoch" else None,
            "world_size": self.world_size,
            "caches": dict(self.identities),
        }

    def state_dict(self) -> dict:
        """Plain ints/floats/strs (JSON- and torch.save-able); "step" is the next batch number."""
        state = {"step": self.step, "fingerprint": self.fingerprint()}
        if self.mixer is not None:
            state.update(self.mixer.state())
        else:  # random mode: the ledger of this rank (any rank may load it: the loader replays the saver's rank)
            state["ledger"] = {"rank": self.rank, **self.ledger.state()}
            state["history"] = self.history.state()
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue where `state` was saved. Its fingerprint must equal this loader's (zero weights
        aside), its schedule this one's at every step already read (module docstring); in random mode
        rank may differ: every rank is at the same step, so one checkpoint (e.g. rank 0's) restores all
        ranks. In epoch mode each rank loads its own state."""
        if not isinstance(state, Mapping) or "step" not in state:
            raise ValueError(f"not a MixedLoader state (no 'step'): {state!r}")
        saved = state.get("fingerprint")
        mine = self.fingerprint()
        saved_schedule = saved.get("schedule") if isinstance(saved, Mapping) else None
        if isinstance(saved, Mapping):  # the caches of sources both name; the schedule below
            shared = set(mine["caches"]) & set(saved.get("caches") or {})
            saved = {**saved, "caches": {n: c for n, c in (saved.get("caches") or {}).items() if n in shared}}
            saved.pop("schedule", None)
            mine["caches"] = {n: c for n, c in mine["caches"].items() if n in shared}
        refuse_other_plan(saved, {k: v for k, v in mine.items() if k != "schedule"})
        step = check_int("state['step']", state["step"], 0)
        try:
            past = Schedule.of(saved_schedule)
        except (TypeError, ValueError) as e:
            raise ValueError(f"refusing to resume: the state's schedule is not one ({e})") from None
        differs = self.schedule.first_difference(past, step)
        if differs:
            raise ValueError(
                f"refusing to resume at step {step:,}: the loader's schedule changes the past: {differs}; keep the "
                f"breakpoints before step {step:,} as saved and edit only later ones"
            )
        if self.mixer is not None:
            self.mixer.restore(state, self.B, step, self.schedule)
        else:
            try:
                history = Schedule.of(state["history"])
                past, effective = (
                    history.spliced(history, step, self.names),
                    history.spliced(self.schedule, step, self.names),
                )
            except (KeyError, TypeError, ValueError) as e:
                raise ValueError(
                    f"refusing to resume: the state's schedule history does not fit this loader ({e})"
                ) from None
            self.ledger = random_mixer.check_random_ledger(self, state.get("ledger"), step, past)
            self.history = effective
            self.ledger.anchor(effective.steps)
        self.step = step

    def __repr__(self) -> str:
        return (
            f"MixedLoader(mode={self.mode!r}, p={self.schedule!r}, B={self.B}, T={self.T}, seed={self.seed}, "
            f"rank={self.rank}/{self.world_size}, step={self.step:,})"
        )

    def made_resident(self) -> MixedLoader:
        """This loader with its window sources' arrays in one tensor in the memory of its device
        (training/resident.py: checked to fit, one gather per batch); the same batches from the same step."""
        from niels_gpt.training.resident import share_windows

        share_windows(list(self.sources.values()), self.device, what=f"the caches of {self.names}")
        self.assembler = Assembler(self.sources, B=self.B, T=self.T, device=self.device)
        return self
