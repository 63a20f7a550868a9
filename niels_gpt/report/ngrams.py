"""Hashed n-grams of token ids (or bytes), and membership tests fast enough to scan whole train caches.

The n-gram starting at position i of a sequence x (uint16 token ids, or uint8 bytes) is hashed with
the polynomial rolling hash

    h(i) = x[i]*B^(n-1) + x[i+1]*B^(n-2) + ... + x[i+n-1]   (mod 2**64)

computed for every start of a chunk at once from shifted views of the chunk (by doubling: about
2 log2(n) whole-array multiply-adds, `rolling_hashes`), never a Python loop per position. Two different n-grams share a
hash with probability about 2**-64, so a train scan of 10**9 n-grams against 10**7 val n-grams
expects 10**-3 false matches in total.

`NgramIndex` holds the val side: the sorted distinct hashes (8 bytes each) and two bit filters of at
least 16 slots per hash (at most 4 bytes per hash each), so its memory is set by the val side alone.
`lookup` answers for a whole chunk of train hashes at once:
  1. filter 1, slot = the top bits of h: a non-member passes with probability <= 1/16;
  2. filter 2, slot = the top bits of h * C (another odd multiplier), on those survivors;
  3. an exact test in an open-addressing hash table over the keys (`HashTable`, one probe for most), on
     the members and the <= 1/256 of non-members left.
`scan_matches` runs that over a train split read in fixed chunks (consecutive chunks overlap by
n - 1 positions, so no n-gram is lost at a chunk or shard boundary), on a few threads (numpy releases
the GIL in these loops): memory per thread is a few bytes per chunk position whatever the split's size
(the split is a `token_files.DiskSequence`: plain reads, not a memory map).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from threading import Lock

import numpy as np

from niels_gpt.token_files import DiskSequence

# Odd (so multiplying by it is a bijection mod 2**64) with bits spread over the whole word, so every
# id reaches the top bits the filters use. The splitmix64 increment; any such constant works.
BASE = np.uint64(0x9E3779B97F4A7C15)
# Filter 2 slots come from h * FILTER2_MULTIPLIER: its top bits are independent of h's top bits.
FILTER2_MULTIPLIER = np.uint64(0xBF58476D1CE4E5B9)
SLOT_BITS_PER_KEY = 4  # >= 2**4 = 16 filter slots per val hash: <= 1/16 of non-members pass a filter
MIN_FILTER_BITS = 16  # 8 KB filters at least: below that nothing is saved
# Positions per chunk: at 256 K the 2 MB hash array stays in cache; in a sweep of 32 K..1 M (5 M val
# 13-grams, one thread) it scanned fastest, ~1.7x the rate of 1 M chunks; smaller ones pay per-call overhead.
CHUNK_POSITIONS = 1 << 18
_U8_ONE = np.uint8(1)


def rolling_hashes(x: np.ndarray, n: int) -> np.ndarray:
    """uint64 hash of every n-gram of `x` (len(x) - n + 1 of them; none if x is shorter than n).

    The polynomial of the module docstring, built by doubling rather than by Horner's n - 1 steps: the
    hash of a block of 2w ids is h_w(i) * B^w + h_w(i + w), and a block of width w set in n's binary digits
    is put in front of the blocks already taken (d ids): h(i) = h_w(i) * B^d + h_d(i + w). About
    2 log2(n) whole-array multiply-adds: 5 for n = 13 (Horner: 12), 7 for n = 50 (Horner: 49); the same
    values, mod 2**64."""
    length = len(x)
    m = length - n + 1
    if m <= 0:
        return np.zeros(0, dtype=np.uint64)
    block = x.astype(np.uint64)  # h_width of every start where a block of `width` ids fits
    taken, done, width = None, 0, 1  # `taken`: h of the last `done` ids of every n-gram's window
    while True:
        if n & width:
            k = length - done - width + 1
            if taken is None:
                taken = block[:k]
            else:
                front = block[:k] * _power(done)
                front += taken[width : width + k]
                taken = front
            done += width
        if 2 * width > n:
            return taken
        k = length - 2 * width + 1
        doubled = block[:k] * _power(width)
        doubled += block[width : width + k]
        block, width = doubled, 2 * width


def _power(k: int) -> np.uint64:
    """B^k mod 2**64."""
    return np.uint64(pow(int(BASE), k, 1 << 64))


def sorted_unique(x: np.ndarray) -> np.ndarray:
    """np.unique(x) (the distinct values, ascending) by a sort: numpy 2.3+ answers a plain np.unique of
    integers with a hash table, measured ~15x slower on 2 M int64 (1.68 s vs 0.11 s)."""
    s = np.sort(np.asarray(x).reshape(-1))
    if len(s) < 2:
        return s
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def windows_touching(flags: np.ndarray, n: int) -> np.ndarray:
    """For every n-gram start of a sequence with per-position `flags`: does the n-gram hold a flag?"""
    if len(flags) < n:
        return np.zeros(0, dtype=bool)
    counts = np.zeros(len(flags) + 1, dtype=np.int64)
    np.cumsum(flags, out=counts[1:])
    return counts[n:] - counts[:-n] > 0


class NgramIndex:
    """The distinct val n-gram hashes (sorted) and two bit filters over them; see the module docstring."""

    def __init__(self, keys: np.ndarray):
        self.keys = np.asarray(keys, dtype=np.uint64)
        if len(self.keys) > 1 and not bool(np.all(self.keys[1:] > self.keys[:-1])):
            raise ValueError("NgramIndex keys must be sorted and distinct (use NgramIndex.from_hashes)")
        self.bits = max(MIN_FILTER_BITS, int(len(self.keys)).bit_length() + SLOT_BITS_PER_KEY)
        self._shift = np.uint64(64 - self.bits)
        self._filters = self.filters_over(self.keys)
        self._hash_table = None  # built on the first `contains`, once (scan threads share the index)
        self._table_lock = Lock()

    @classmethod
    def from_hashes(cls, hashes: np.ndarray) -> tuple[NgramIndex, np.ndarray]:
        """(index of the distinct hashes, position of each given hash among them)."""
        keys, inverse = np.unique(np.asarray(hashes, dtype=np.uint64), return_inverse=True)
        return cls(keys), inverse.reshape(-1)

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def nbytes(self) -> int:
        return self.keys.nbytes + sum(f.nbytes for f in self._filters)

    def _slots(self, h: np.ndarray, multiplier) -> np.ndarray:
        """Filter slot of each hash, as int64 (numpy indexes with int64 several times faster than uint64)."""
        return ((h if multiplier is None else h * multiplier) >> self._shift).view(np.int64)

    def filters_over(self, keys: np.ndarray, which: tuple[int, ...] = (0, 1)) -> list[np.ndarray]:
        """This index's bit filters (0: slot from h, 1: from h * FILTER2_MULTIPLIER), built over `keys`
        (a subset of its keys: `without`, compiled.CompiledIndex.with_skip)."""
        return [self._build_filter(self._slots(keys, (None, FILTER2_MULTIPLIER)[w])) for w in which]

    def _build_filter(self, slots: np.ndarray) -> np.ndarray:
        table = np.zeros(1 << (self.bits - 3), dtype=np.uint8)
        np.bitwise_or.at(table, slots >> 3, _U8_ONE << (slots & 7).astype(np.uint8))
        return table

    def _passes(self, table: np.ndarray, slots: np.ndarray) -> np.ndarray:
        bit = (table[slots >> 3] >> (slots & 7).astype(np.uint8)) & _U8_ONE
        return bit.view(bool)

    def lookup(self, hashes: np.ndarray) -> np.ndarray:
        """Indices into `keys` of the given hashes that are members (one per member occurrence, in order):
        `key_ids`' filters and hash table (a binary search per hash that passes both filters cost ~1.8 us at
        5 M keys, 3.5x the whole scan on text where 5 % of the positions are members)."""
        if not len(self.keys) or not len(hashes):
            return np.zeros(0, dtype=np.int64)
        ids = self.key_ids(hashes)
        return ids[ids >= 0]

    def contains(self, hashes: np.ndarray) -> np.ndarray:
        """Bool per given hash: is it a member? (`lookup` by position, for callers that need where.) The
        hashes that pass both filters are looked up in an open-addressing table (`_table`: one probe for
        most, never a binary search), so a text that is mostly members costs about as little as one that
        is not (curation's worst case: a train split copied from its val split)."""
        return self.key_ids(hashes) >= 0

    def key_ids(self, hashes: np.ndarray) -> np.ndarray:
        """Per given hash: its position in `keys`, or -1 for a non-member. Looked up CHUNK_POSITIONS
        hashes at a time (temporaries stay in cache: 2x faster on 2 M mostly-member hashes than at once)."""
        out = np.full(len(hashes), -1, dtype=np.int64)
        if not len(self.keys) or not len(hashes):
            return out
        if len(hashes) > CHUNK_POSITIONS:
            for lo in range(0, len(hashes), CHUNK_POSITIONS):
                out[lo : lo + CHUNK_POSITIONS] = self.key_ids(hashes[lo : lo + CHUNK_POSITIONS])
            return out
        where = np.flatnonzero(self._passes(self._filters[0], self._slots(hashes, None)))
        where = where[self._passes(self._filters[1], self._slots(hashes[where], FILTER2_MULTIPLIER))]
        out[where] = self._table().key_ids(hashes[where])
        return out

    def without(self, drop: np.ndarray) -> NgramIndex:
        """The same keys and hash table with filters over the keys not marked in `drop` (a bool per key): a
        hash of a dropped key mostly stops at a filter, never reaching the table; if it passes both, it is
        still found. For scans that need each key once (`scan_matches`): a key already seen can drop out."""
        other = object.__new__(NgramIndex)
        other.__dict__.update(self.__dict__)
        rest = self.keys[~drop]
        other._filters = self.filters_over(rest)
        self._table()  # built once, in the index both share
        other._hash_table = self._hash_table
        return other

    def _table(self) -> HashTable:
        with self._table_lock:  # two threads building it at once would hold two tables and their temporaries
            if self._hash_table is None:
                self._hash_table = HashTable(self.keys)
        return self._hash_table


class HashTable:
    """A set of distinct uint64 keys in an open-addressing table (linear probing, load <= 1/4; slot = the top
    bits of key * an odd multiplier; 0 marks an empty slot, so the key 0 is kept apart), each slot with the
    key's position in the array it was built from. Built and probed for whole arrays at once: each round
    places (or tests) every pending key at its current slot."""

    MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)

    def __init__(self, keys: np.ndarray):
        keys = np.asarray(keys, dtype=np.uint64)
        zero = np.flatnonzero(keys == 0)
        self.zero_id = int(zero[0]) if len(zero) else -1
        ids = np.flatnonzero(keys != 0)
        self.bits = max(10, int(len(ids)).bit_length() + 2)
        self.mask = (1 << self.bits) - 1
        self.table = np.zeros(1 << self.bits, dtype=np.uint64)
        self.ids = np.full(1 << self.bits, -1, dtype=np.int32 if len(keys) < 2**31 else np.int64)
        pending, pos = ids, self._home(keys[ids])
        while len(pending):
            free = np.flatnonzero(self.table[pos] == 0)
            claim = pending[free].astype(self.ids.dtype)  # the ids' own type: the fast ufunc.at loop (20x)
            np.maximum.at(self.ids, pos[free], claim)  # one key per free slot this round: the last
            won = free[self.ids[pos[free]] == claim]  # (np.unique's sort took 4x the whole build)
            self.table[pos[won]] = keys[pending[won]]
            self.ids[pos[won]] = pending[won]
            left = np.ones(len(pending), dtype=bool)
            left[won] = False
            pending, pos = pending[left], (pos[left] + 1) & self.mask

    def _home(self, h: np.ndarray) -> np.ndarray:
        return ((h * self.MULTIPLIER) >> np.uint64(64 - self.bits)).astype(np.int64)

    def key_ids(self, hashes: np.ndarray) -> np.ndarray:
        """Per hash: the position of the equal key, or -1."""
        hashes = np.asarray(hashes, dtype=np.uint64)
        out = np.full(len(hashes), -1, dtype=np.int64)
        out[hashes == 0] = self.zero_id
        active = np.flatnonzero(hashes != 0)
        pos = self._home(hashes[active])
        while len(active):
            slot = self.table[pos]
            h = hashes[active]
            found = slot == h
            out[active[found]] = self.ids[pos[found]]
            go_on = ~found & (slot != 0)
            active, pos = active[go_on], (pos[go_on] + 1) & self.mask
        return out

    def contains(self, hashes: np.ndarray) -> np.ndarray:
        return self.key_ids(hashes) >= 0


def _bounded_map(executor: Executor, fn: Callable, items: Iterable, depth: int) -> Iterator:
    """executor.map with at most `depth` calls in flight (bounded memory), results in order."""
    pending: deque = deque()
    for item in items:
        pending.append(executor.submit(fn, item))
        if len(pending) >= depth:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


def scan_matches(
    seq: DiskSequence | np.ndarray,
    n: int,
    index: NgramIndex,
    *,
    num_threads: int = 2,
    chunk: int = CHUNK_POSITIONS,
    on_positions: Callable[[int], object] | None = None,
) -> np.ndarray:
    """Bool per key of `index`: does that n-gram occur anywhere in `seq` (files on disk, or an array in
    memory)? Reads `seq` chunk by chunk. A key is needed once: when the positions found again (keys already
    seen) since the last rebuild outnumber the keys not yet seen, the filters are rebuilt without the seen
    keys (`NgramIndex.without`), so text that repeats its matches stops at the filters instead of probing
    the table for each (at full size on the generated data, where most train positions hold a val n-gram,
    ~3x fewer table probes). The answer does not depend on when that happens."""
    read = seq.read if isinstance(seq, DiskSequence) else lambda lo, hi: seq[lo:hi]
    seen = np.zeros(len(index), dtype=bool)
    n_starts = len(seq) - n + 1
    if n_starts <= 0 or not len(index):
        return seen
    current, again, unseen, stale = [index], 0, len(index), False  # again: found on seen keys since a rebuild

    def work(lo: int) -> tuple[np.ndarray, int]:
        hi = min(lo + chunk, n_starts)
        return current[0].lookup(rolling_hashes(read(lo, hi + n - 1), n)), hi - lo

    with ThreadPoolExecutor(max_workers=max(1, num_threads)) as pool:
        for found, done in _bounded_map(pool, work, range(0, n_starts, chunk), depth=2 * max(1, num_threads)):
            hit_seen = seen[found]
            again += int(np.count_nonzero(hit_seen))
            if not hit_seen.all():
                seen[found] = True
                unseen, stale = len(index) - int(np.count_nonzero(seen)), True
            if stale and again > unseen:  # a rebuild costs about a probe per key left
                current[0], again, stale = index.without(seen), 0, False
            if on_positions is not None:
                on_positions(done)
    return seen
