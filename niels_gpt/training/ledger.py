"""The data-order ledger of a MixedLoader: a running digest of what every batch read, checked on resume.

Epoch mode: the digest after n batches is blake2b-128 of batches 0..n-1 one after the other, each as the source
of every row as `name_id(name)` (so the digest does not depend on which other sources the loader holds) followed
by each source's items in the order it read them, sources in name order (int64). An item and the cache identity
in the plan fingerprint fix the tokens (a window's offset is item * T in its shard order; an SFT item is an
example or a packed row). Random mode: batch i's record is `batch_digest`: blake2b-128 of its rows' name_ids,
then, per source with rows in name order, the array (shard or stream) and start token of each of its windows,
or its item numbers; the running digest is taken over these 16-byte records, so batches (independent in random
mode) can be recomputed apart and a long replay split over processes (`replay_digests`).
Either way the digest after n batches is kept in full in `marks` at n = 1, 2, 4, 8, ... and at the last batch,
and its first FINE_BYTES in `fine` (runs [[first n, hex digits], ...]) after a, a + 1, ..., a + WINDOW batches for
every anchor a (step 0 and the schedule's breakpoints) and after the last WINDOW + 1 batches: at n = 10^6 with
a two-breakpoint schedule a ledger state is ~2.3 KB (~1.1 KB of marks, ~300 bytes per window). The state holds
no hash state: a resumed loader rebuilds it by its replay.

Resume: `first_parting(saved, replayed)` compares a saved ledger with the one recomputed by replaying the plan
from step 0 (no row is read; the replay keeps digests after every n the saved one does) and names where the
histories part. A running digest that differs once differs after every later batch, so with the digest after
n batches agreeing and after n + 1 not, batch n is where they part: exact whenever the parting batch f has
digests kept after f and f + 1 batches on both sides, i.e. f within WINDOW batches from step 0 or from a
breakpoint (at or after it), or among the last WINDOW batches before the save. That covers the common cases:
a changed cache, mixer or code path differs from the first batch that reads the source or takes the path (step
0, a source's first rows, the first step of a breakpoint's weights), a tampered history from the breakpoint it
changed, a tampered final digest at the end. Elsewhere it names the range between the last digest that agrees
and the first that does not (between two powers of two): naming the batch inside it needs the saving run's
digest after every batch of the range (no state of log size can hold those), which
`python -m niels_gpt.training.history ... --digests` prints where the state was saved and `--digests --against
FILE` compares where it is refused. A digest that differs while a later one (or the other digest after as many
batches) agrees was altered, and is named as such. A 4-byte digest may agree by chance (2**-32), which would
name a batch one later; a full mark never does.
"""

from __future__ import annotations

import bisect
import hashlib
import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

DIGEST_BYTES = 16  # blake2b-128: an accidental match of two histories is out of reach
PARALLEL_STEPS = 50_000  # random mode: a replay this long is split over processes (below: ~0.5 s on one core)
WINDOW = 32  # batches after step 0, each breakpoint and before the last whose digest a state keeps (short)
FINE_BYTES = 4  # a short digest: enough to tell where two histories part once full marks proved they do
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
    """Running digest over batches, with full marks at powers of two and short ones near anchors and the last
    batch (module docstring)."""

    def __init__(self, anchors: Iterable[int] = (0,), watch: Iterable[int] = ()):
        self._hash = hashlib.blake2b(digest_size=DIGEST_BYTES)
        self.steps = 0
        self.marks: dict[int, str] = {}  # n -> digest after n batches (hex), n a power of two
        self.fine: dict[int, bytes] = {}  # n -> the first FINE_BYTES of the digest after n batches (windows, watch)
        self._recent: deque[bytes] = deque(maxlen=WINDOW + 1)  # digests after the last batches, the last after `steps`
        self._watch = frozenset(watch)
        self.anchor(anchors)

    @property
    def digest(self) -> bytes:
        return self._hash.digest()

    def anchor(self, anchors: Iterable[int]) -> None:
        """Keep short digests after a, a + 1, ..., a + WINDOW batches for every a of `anchors` (a schedule's
        breakpoints; step 0 always), so that a parting at any of batches a..a+WINDOW-1 is named exactly; those
        already past are taken from the recent window where it has them."""
        self._anchors = sorted({0, *anchors})
        wanted = {n for a in self._anchors for n in range(max(a, 1), a + WINDOW + 1)} | self._watch
        for n in wanted:
            back = self.steps - n
            if 0 <= back < len(self._recent) and n not in self.fine:
                self.fine[n] = self._recent[-1 - back][:FINE_BYTES]
        self._wanted = sorted(n for n in wanted if n > self.steps)
        self._next = 0  # index into _wanted of the next batch count that keeps a short digest

    def _anchored(self, n: int) -> bool:
        k = bisect.bisect_right(self._anchors, n) - 1  # the last anchor at or before n
        return k >= 0 and n - self._anchors[k] <= WINDOW

    def _after(self, steps: int) -> None:
        """Note the digest after `steps` batches (the hash covers exactly them)."""
        self.steps = steps
        d = self._hash.digest()
        self._recent.append(d)
        wanted = self._wanted
        while self._next < len(wanted) and wanted[self._next] <= steps:
            if wanted[self._next] == steps:
                self.fine[steps] = d[:FINE_BYTES]
            self._next += 1
        if steps & (steps - 1) == 0:
            self.marks[steps] = d.hex()

    def add(self, step: int, sources: np.ndarray, items: Sequence[np.ndarray]) -> None:
        """Batch `step` (the next one): the name_id of every row's source, each source's items in name order."""
        if step != self.steps:
            raise ValueError(f"ledger: batch {step:,} recorded after {self.steps:,} batches")
        update = self._hash.update
        update(sources)
        for part in items:  # 1-D slices and concatenations: contiguous
            update(part)
        self._after(step + 1)

    def add_digest(self, digest: bytes) -> None:
        """The next batch as its batch_digest() (random mode)."""
        self._hash.update(digest)
        self._after(self.steps + 1)

    def add_digests(self, digests: bytes) -> None:
        """The next len(digests) / 16 batches as their batch_digest()s, one after the other (random mode)."""
        self.add_records(digests, DIGEST_BYTES)

    def add_records(self, records, size: int) -> None:
        """The next batches as `records`, one record of `size` bytes a batch, one after the other (a bytes-like
        object, or a C-contiguous array): one hash update per stretch between two batch counts that keep a digest
        (powers of two, anchor windows, watched ones, the last WINDOW + 1)."""
        data = memoryview(records).cast("B")
        count, first = len(data) // size, self.steps
        if count * size != len(data):
            raise ValueError(f"ledger: {len(data):,} bytes are not whole records of {size} bytes")
        last = first + count
        stops = set(range(max(first + 1, last - WINDOW), last + 1))
        stops.update(1 << k for k in range(first.bit_length(), last.bit_length()) if first < 1 << k <= last)
        stops.update(self._wanted[bisect.bisect_right(self._wanted, first) : bisect.bisect_right(self._wanted, last)])
        done = first
        for n in sorted(stops):
            self._hash.update(data[(done - first) * size : (n - first) * size])
            self._after(done := n)

    def short(self, n: int) -> str | None:
        """The first FINE_BYTES of the digest after n batches (hex), where this ledger kept it."""
        back = self.steps - n
        if 0 <= back < len(self._recent):
            return self._recent[-1 - back][:FINE_BYTES].hex()
        if n in self.fine:
            return self.fine[n].hex()
        return self.marks[n][: 2 * FINE_BYTES] if n in self.marks else None

    def state(self) -> dict[str, Any]:
        if not self.steps:
            return {"steps": 0, "marks": {}, "fine": []}
        marks = {**self.marks, self.steps: self.digest.hex()}
        fine = {n: d for n, d in self.fine.items() if n <= self.steps and self._anchored(n)}
        fine.update({self.steps - back: d[:FINE_BYTES] for back, d in enumerate(reversed(self._recent))})
        runs: list[list] = []
        for n in sorted(fine):
            if runs and runs[-1][0] + len(runs[-1][1]) // (2 * FINE_BYTES) == n:
                runs[-1][1] += fine[n].hex()
            else:
                runs.append([n, fine[n].hex()])
        return {"steps": self.steps, "marks": {str(n): d for n, d in sorted(marks.items())}, "fine": runs}

    @staticmethod
    def watched(saved: Any) -> list[int]:
        """The batch counts a saved ledger state keeps short digests after ([] when it has none readable)."""
        try:
            return sorted(_fine_digests(saved["fine"]))
        except (KeyError, TypeError, ValueError):
            return []


def _fine_digests(runs: Any) -> dict[int, str]:
    """{n: short digest (hex)} of a state's "fine" runs [[first n, hex of the digests after n, n + 1, ...], ...]."""
    if not isinstance(runs, list):
        raise ValueError("not a list")
    out, width = {}, 2 * FINE_BYTES
    for run in runs:
        ok = isinstance(run, list) and len(run) == 2 and isinstance(run[0], int) and isinstance(run[1], str)
        if not ok or isinstance(run[0], bool) or len(run[1]) % width:
            raise ValueError(f"not a run [batch, hex digits]: {run!r}")
        for k in range(len(run[1]) // width):
            out[run[0] + k] = run[1][k * width : (k + 1) * width].lower()
    return out


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


def refusal(parting: str) -> str:
    """The one message a resume refused by its ledger gives."""
    return (
        f"refusing to resume: the data order recomputed from the caches, the schedule and this code does not match "
        f"the state's ledger ({parting}); resume with the caches and niels_gpt that saved it"
    )


def first_parting(saved: Any, replayed: Ledger) -> str | None:
    """None if `saved` (a Ledger.state()) agrees with `replayed` at every digest it keeps, else where they part
    (module docstring): the batch, where the digests before and after it are kept, else the range between the
    last digest that agrees and the first that does not. A digest that differs while a later one (or the other
    digest after as many batches) agrees was altered, and is named as such."""
    mine = replayed.state()
    if not isinstance(saved, Mapping) or not isinstance(saved.get("marks"), Mapping):
        return "the state has no ledger"
    if saved.get("steps") != mine["steps"] or set(saved["marks"]) != set(mine["marks"]):
        return f"its ledger covers {saved.get('steps')!r} batches with marks {sorted(saved['marks'])}"
    try:
        fine = _fine_digests(saved.get("fine", []))
    except ValueError as e:
        return f"its ledger's short digests are not [[batch, hex digits], ...] ({e})"
    points = [(int(n), saved["marks"][n] == mine["marks"][n]) for n in mine["marks"]]
    for n, short in fine.items():
        here = replayed.short(n)
        if here is None:
            return f"its ledger keeps a digest after {n:,} batches, outside the {mine['steps']:,} it covers"
        points.append((n, short == here))
    differ = [n for n, agrees in points if not agrees]
    if not differ:
        return None
    first = min(differ)
    if any(agrees for n, agrees in points if n >= first):
        return f"the state's ledger mark after {first:,} batches was altered: later marks agree with the replay"
    agreed = max([0, *(n for n, _ in points if n < first)])
    if first - 1 == agreed:
        return f"the histories part at batch {agreed:,}"
    return (
        f"the histories part at a batch from {agreed:,} to {first - 1:,} (the digests after {agreed:,} batches agree, "
        f"after {first:,} they do not; a state keeps the digest after every batch only near step 0, the schedule's "
        f"breakpoints and its last step: `python -m niels_gpt.training.history --digests --against FILE` names "
        "the batch)"
    )
