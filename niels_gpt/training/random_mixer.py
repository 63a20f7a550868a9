"""Random mode of MixedLoader: the draws of every batch, and the ledger recomputed from them.

Batch number `step` on rank `r` is a pure function of (seed, step, r), the schedule and the sources: a fresh
generator `torch.Generator().manual_seed(derive_seed(seed, step, rank))` (niels_gpt.sampling) draws, in order,
  1. `draw_rows(schedule, step, B, g)`: the source of every row, draw_sources' multinomial over p(step)
     (sources in sorted-name order);
  2. for each source with k > 0 rows, in sorted-name order, where its k rows read (assembly.Assembler.draw:
     window sources an (array, start) per row, item sources an item number), or its get_batch(B=k).
`random_draws` makes those draws without reading a row, `batch_digests` turns them into the ledger's record of
each batch (ledger.batch_digest), `random_ledger` is the ledger of a whole history (long ones split over
processes: ledger.replay_digests) and `check_random_ledger` what a resumed loader does with a saved one: the
saving rank's history recomputed must be the one it records (ledger.first_parting), else one ValueError.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import numpy as np
import torch

from niels_gpt.sampling import derive_seed, mixture_probs
from niels_gpt.training import random_replay
from niels_gpt.training.ledger import (
    DIGEST_BYTES,
    Ledger,
    batch_digest,
    first_parting,
    name_id,
    refusal,
    replay_digests,
)
from niels_gpt.training.schedule import Schedule

VECTOR_STEPS = 64  # from this many batches on, batch_digests recomputes them vectorized (random_replay.py)
_LAST_MIXTURE: tuple = (None, None)  # (weights, their probabilities tensor) of the last flat step drawn


def draw_rows(schedule: Schedule, step: int, B: int, g: torch.Generator) -> torch.Tensor:
    """The source of each of the B rows of random-mode batch `step` (int64 (B,), indices into schedule.names):
    draw_sources' multinomial."""
    global _LAST_MIXTURE
    p = schedule.at(step)
    if schedule.flat(step):  # one weights object per breakpoint: its tensor kept (mixture_probs costs ~2 us)
        last, probs = _LAST_MIXTURE
        if last is not p:
            probs = mixture_probs(p)[1]
            _LAST_MIXTURE = (p, probs)
        return torch.multinomial(probs, B, replacement=True, generator=g)
    # the same draw; a mixture per step would churn draw_sources' cache (measured 2x slower at B=64)
    return torch.multinomial(torch.tensor(list(p.values()), dtype=torch.float64), B, True, generator=g)


def random_draws(loader, step: int, *, rank: int, schedule: Schedule, generator=None):
    """(names, which, [(name, where)]) of random-mode batch `step` of `loader` on `rank` under `schedule`, drawn
    as the batch draws them but without reading a row: `which` indexes `names` (the schedule's sources), `where`
    as Assembler.draw gives it (None for sources with get_batch alone)."""
    g = (generator or torch.Generator()).manual_seed(derive_seed(loader.seed, step, rank))  # reseeded: as new
    which = draw_rows(schedule, step, loader.B, g).numpy()
    names, places = schedule.names, []
    for k, count in enumerate(np.bincount(which, minlength=len(names)).tolist()):
        if count:
            name = names[k]
            if name not in loader.sources:
                raise ValueError(f"step {step:,} draws source {name!r}, which this loader does not have")
            places.append((name, loader.assembler.draw(loader._index[name], count, g)))
    return names, which, places


def batch_digests(loader, first: int, last: int, *, rank: int, schedule: Schedule) -> bytes:
    """The ledger's record (ledger.batch_digest, 16 bytes) of random-mode batches first..last-1 of `loader` on
    `rank` under `schedule`, one after the other, recomputed from their draws (no row read): for VECTOR_STEPS or
    more, by random_replay.py when it applies and gives what torch's own draws give for the first and the last
    batch and at each breakpoint, else batch by batch."""
    if last - first >= VECTOR_STEPS:
        fast = random_replay.replay_digests(loader, first, last, rank=rank, schedule=schedule)
        checks = {first, last - 1, *(s for s in schedule.steps if first <= s < last)}
        size = DIGEST_BYTES
        if fast is not None and all(
            fast[(s - first) * size : (s - first + 1) * size]
            == draws_digests(loader, s, s + 1, rank=rank, schedule=schedule)
            for s in sorted(checks)
        ):
            return fast
    return draws_digests(loader, first, last, rank=rank, schedule=schedule)


def draws_digests(loader, first: int, last: int, *, rank: int, schedule: Schedule) -> bytes:
    """batch_digests batch by batch: each batch's draws made by torch."""
    generator, out = torch.Generator(), []
    mine = loader._ids
    for step in range(first, last):
        names, which, places = random_draws(loader, step, rank=rank, schedule=schedule, generator=generator)
        ids = mine if names == loader.names else np.array([name_id(n) for n in names], dtype=np.int64)
        out.append(batch_digest(ids[which], [where for _, where in places]))
    return b"".join(out)


def random_ledger(loader, steps: int, *, rank: int, schedule: Schedule, watch=()) -> Ledger:
    """The ledger of random-mode batches 0..steps-1 of `loader` on `rank` under `schedule`, recomputed (no row
    read; long replays split over processes: ledger.replay_digests); it keeps digests after the batch counts in
    `watch` too (a saved ledger's)."""
    ledger = Ledger(anchors=schedule.steps, watch=watch)
    ledger.add_digests(replay_digests(partial(loader.batch_digests, rank=rank, schedule=schedule), 0, steps))
    return ledger


def check_random_ledger(loader, saved: Any, steps: int, past: Schedule) -> Ledger:
    """`loader`'s ledger after `steps` random-mode batches, once the history of the rank that saved `saved`
    (its draws under the saved schedule `past`, recomputed) proves to be the one it records."""
    rank = saved.get("rank") if isinstance(saved, Mapping) else None
    replayed = None
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < loader.world_size:
        parting = "the state has no ledger" if not isinstance(saved, Mapping) else f"its ledger's rank is {rank!r}"
    else:
        try:
            replayed = random_ledger(loader, steps, rank=rank, schedule=past, watch=Ledger.watched(saved))
        except ValueError as e:
            parting = str(e)
        else:
            parting = first_parting(saved, replayed)
    if parting:
        raise ValueError(refusal(parting))
    if rank == loader.rank:
        return replayed
    return random_ledger(loader, steps, rank=loader.rank, schedule=past)
