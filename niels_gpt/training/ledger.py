"""The data-order ledger of a MixedLoader: a running digest of what every batch read, checked on resume.

Epoch mode: the digest after n batches is blake2b-128 of batches 0..n-1 one after the other, each as the source
of every row as `name_id(name)` (so the digest does not depend on which other sources the loader holds) followed
by each source's items in the order it read them, sources in name order (int64). An item and the cache identity
in the plan fingerprint fix the tokens (a window's offset is item * T in its shard order; an SFT item is an
example or a packed row). Random mode: batch i's record is `batch_digest`: blake2b-128 of its rows' name_ids,
then, per source with rows in name order, the array (shard or stream) and start token of each of its windows,
or its item numbers; the running digest is taken over these 16-byte records, so batches (independent in random
mode) can be recomputed apart and a long replay split over processes (`replay_digests`).
Either way the digest after n batches is kept in `marks` at n = 1, 2, 4, 8, ... and at the last batch, so a
state holds about log2(n) hex strings (~1.1 KB at n = 10^6). The state holds no hash state: a resumed loader
rebuilds it by its replay.

Resume: `first_parting(saved, replayed)` compares a saved ledger with the one recomputed by replaying the plan
from step 0 (no row is read) and names where the histories part: the last mark that agrees and the first that
does not. A running digest that differs once differs at every later mark, so that range is all a state of
log2(n) digests can tell (each compared mark answers one yes/no question); naming the exact batch needs the
saving run's digest after every batch of the range: `python -m niels_gpt.training.history ... --digests` prints
them where the state was saved, and `--digests --against FILE` where it is refused names the first batch that
differs. A mark that differs between two that agree was altered, and is named as such.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

DIGEST_BYTES = 16  # blake2b-128: an accidental match of two histories is out of reach
PARALLEL_STEPS = 50_000  # random mode: a replay this long is split over processes (below: ~2-5 s on one core)
REPLAY_WORKERS = 16  # at most this many processes replay (each computes its stretch of batches' digests)


def name_id(name: str) -> int:
    """A source's number in the ledger: the first 8 bytes of sha256(name), as an int64."""
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:8], "little", signed=True)


def batch_digest(sources: np.ndarray, wheres: Iterable) -> bytes:
    """Random mode's record of one batch: blake2b-128 of its rows' source ids, then what each source with rows
    drew, in name order (a `where` of assembly.Assembler.draw): its rows' arrays and start tokens (window
    sources) or item numbers (item sources); nothing for a source with get_batch alone (None)."""
    h = hashlib.blake2b(sources, digest_size=DIGEST_BYTES)
    update = h.update
    for where in wheres:
        if type(where) is tuple:
            for part in where:
                update(part)
        elif where is not None:
            update(where)
    return h.digest()


class Ledger:
    """Running digest over batches, with marks at powers of two (module docstring)."""

    def __init__(self):
        self._hash = hashlib.blake2b(digest_size=DIGEST_BYTES)
        self.steps = 0
        self.marks: dict[int, str] = {}

    @property
    def digest(self) -> bytes:
        return self._hash.digest()

    def add(self, step: int, sources: np.ndarray, items: Sequence[np.ndarray]) -> None:
        """Batch `step` (the next one): the name_id of every row's source, each source's items in name order."""
        if step != self.steps:
            raise ValueError(f"ledger: batch {step:,} recorded after {self.steps:,} batches")
        update = self._hash.update
        update(sources)
        for part in items:  # 1-D slices and concatenations: contiguous
            update(part)
        self.steps = step + 1
        if self.steps & (self.steps - 1) == 0:
            self.marks[self.steps] = self.digest.hex()

    def add_digest(self, digest: bytes) -> None:
        """The next batch as its batch_digest() (random mode)."""
        self._hash.update(digest)
        self.steps = steps = self.steps + 1
        if steps & (steps - 1) == 0:
            self.marks[steps] = self._hash.hexdigest()

    def add_digests(self, digests: bytes) -> None:
        """The next len(digests) / 16 batches as their batch_digest()s, one after the other (random mode): one
        hash update per stretch between two marks."""
        left = memoryview(digests)
        while len(left):
            to_mark = (1 << self.steps.bit_length()) - self.steps  # batches up to the next power of two
            take = min(len(left) // DIGEST_BYTES, to_mark)
            self._hash.update(left[: take * DIGEST_BYTES])
            left, self.steps = left[take * DIGEST_BYTES :], self.steps + take
            if self.steps & (self.steps - 1) == 0:
                self.marks[self.steps] = self.digest.hex()

    def state(self) -> dict[str, Any]:
        marks = {**self.marks, self.steps: self.digest.hex()} if self.steps else {}
        return {"steps": self.steps, "marks": {str(n): d for n, d in sorted(marks.items())}}


_JOB: Callable[[int, int], bytes] | None = None  # what the forked replay workers run (set before they fork)


def _run_job(span: tuple[int, int]) -> bytes:
    torch_threads_one()
    return _JOB(*span)


def torch_threads_one() -> None:
    import torch

    torch.set_num_threads(1)


def replay_digests(digests: Callable[[int, int], bytes], first: int, last: int, workers: int | None = None) -> bytes:
    """`digests(first, last)` (the batch digests of batches first..last-1, each computed on its own), split over
    `workers` forked processes (default: the CPUs this process may use, at most REPLAY_WORKERS) when there are
    at least PARALLEL_STEPS batches and this process may fork children (not in a daemonic DataLoader worker)."""
    global _JOB
    if workers is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        workers = min(cpus, REPLAY_WORKERS)
    serial = multiprocessing.current_process().daemon or "fork" not in multiprocessing.get_all_start_methods()
    if workers < 2 or last - first < PARALLEL_STEPS or serial:
        return digests(first, last)
    bounds = np.linspace(first, last, workers * 4 + 1).astype(np.int64).tolist()
    _JOB = digests
    try:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            return b"".join(pool.map(_run_job, list(zip(bounds[:-1], bounds[1:])), chunksize=1))
    finally:
        _JOB = None


def first_parting(saved: Any, replayed: Ledger) -> str | None:
    """None if `saved` (a Ledger.state()) agrees with `replayed` at every mark, else where they part: the last
    batch both histories hold alike and the first mark that differs (a running digest that differs once differs
    at every later mark, so a mark that differs between two that agree was altered)."""
    mine = replayed.state()
    if not isinstance(saved, Mapping) or not isinstance(saved.get("marks"), Mapping):
        return "the state has no ledger"
    if saved.get("steps") != mine["steps"] or set(saved["marks"]) != set(mine["marks"]):
        return f"its ledger covers {saved.get('steps')!r} batches with marks {sorted(saved['marks'])}"
    marks = sorted(int(k) for k in mine["marks"])
    differ = [n for n in marks if saved["marks"][str(n)] != mine["marks"][str(n)]]
    if not differ:
        return None
    first = differ[0]
    if differ != [n for n in marks if n >= first]:
        return f"the state's ledger mark after {first:,} batches was altered: later marks agree with the replay"
    agreed = max([0, *(n for n in marks if n < first)])
    if first - 1 == agreed:
        return f"the histories part at batch {agreed:,}"
    return (
        f"the histories part at a batch from {agreed:,} to {first - 1:,} (the digests after {agreed:,} batches "
        f"agree, after {first:,} they do not)"
    )
