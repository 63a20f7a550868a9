"""Compiled loops (numba) for curation's passes over every train token and every document: the documents'
keys (`doc_keys_into`), the token n-grams looked up among the protected ones (`CompiledIndex`), and the LSH
bands of near-duplicate detection (`band_keys_into`, `band_pairs`, `pair_counts_into`).

They were whole-array numpy: about ten passes over a chunk per token for the keys (words, their hashes,
shingles, bins), and for the lookups a rolling hash, two filters and a hash table probed in rounds. A loop
that reads each token once does the same arithmetic on values held in registers; at full size (433 M train
tokens) that was most of `curate`'s CPU time. Measured in benchmarks/bench_curation_scan.py and
benchmarks/bench_dedup.py against the numpy definitions, which stay as the reference the tests compare with
(dedup.doc_keys_reference; report/ngrams.py's rolling_hashes + NgramIndex.key_ids; tests/curation/test_compiled.py
writes the band keys and pairs out in Python).

Every value is the numpy path's, bit for bit (uint64 arithmetic wraps mod 2**64 the same way), so the
decisions do not change. The loops release the GIL (curate runs chunks on a thread pool) and are cached on
disk after the first compile (numba's cache beside this file, or the user's cache folder where this one is
read-only); where neither can be written they are compiled once per process (~1 s each). Only the jobs
that key documents or look up n-grams import this module (numba's import and its LLVM library: ~60 MB).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from niels_gpt.report.ngrams import BASE as NGRAM_BASE
from niels_gpt.report.ngrams import FILTER2_MULTIPLIER, NgramIndex, _power

_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)  # words.mix64's constants
_S27, _S30, _S31, _S32 = np.uint64(27), np.uint64(30), np.uint64(31), np.uint64(32)
_LOW32 = np.uint64(0xFFFFFFFF)
_ONE, _THREE, _SEVEN = np.uint64(1), np.uint64(3), np.uint64(7)
TABLE_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)  # slot = top bits of key * this (odd)
_NO_MASK = np.zeros(0, dtype=np.bool_)


def _jit(fn):
    """njit without the GIL, cached on disk where numba finds a writable place (else compiled per process)."""
    try:
        return njit(nogil=True, cache=True)(fn)
    except RuntimeError:  # numba: "cannot cache function ...: no locator available"
        return njit(nogil=True)(fn)


@njit(inline="always")
def _mix64(h):
    h = h ^ (h >> _S30)
    h = h * _M1
    h = h ^ (h >> _S27)
    h = h * _M2
    return h ^ (h >> _S31)


@njit(inline="always")
def _add_shingle(sig, d, s, num_bins):
    """One-permutation MinHash: the shingle hash `s` (finalized) to its bin of document `d`, min of low 32 bits."""
    b = ((s >> _S32) * num_bins) >> _S32
    v = np.uint32(s & _LOW32)
    if v < sig[d, b]:
        sig[d, b] = v


@_jit
def doc_keys_into(ids, doc_starts, word_start, g, power, length, k, position, exact, sig):
    """dedup.doc_keys in one pass over `ids`: per document, its exact key (into `exact`) and MinHash bins (into
    `sig`, (documents, bins) uint32 filled with EMPTY). Per token: the word's hash h = h * B^len + g (words.py's
    H, Horner over pieces); per word: mix64, the ordered sum's term, the shingle's rolling hash over the last
    `k` words (report/ngrams.py's polynomial) and its bin."""
    n_docs = len(doc_starts)
    num_bins = np.uint64(sig.shape[1])
    ring = np.zeros(k, dtype=np.uint64)
    base = NGRAM_BASE
    base_k = np.uint64(1)
    for _ in range(k):
        base_k = base_k * base
    for d in range(n_docs):
        a = doc_starts[d]
        b = doc_starts[d + 1] if d + 1 < n_docs else len(ids)
        n_words, slot = 0, 0
        total = np.uint64(0)
        shingle = np.uint64(0)
        word = np.uint64(0)
        chars = 0
        for p in range(a, b + 1):
            if p == b or p == a or word_start[ids[p]]:
                if chars > 0:  # a word ends: it counts if it kept a character
                    w = _mix64(word)
                    total += _mix64(w + np.uint64(n_words) * position)
                    shingle = shingle * base + w
                    if n_words >= k:
                        shingle -= ring[slot] * base_k
                    ring[slot] = w
                    slot = slot + 1 if slot + 1 < k else 0  # n_words % k, without a division per word
                    n_words += 1
                    if n_words >= k:
                        _add_shingle(sig, d, _mix64(shingle), num_bins)
                if p == b:
                    break
                word = np.uint64(0)
                chars = 0
            t = ids[p]
            word = word * power[t] + g[t]
            chars += length[t]
        if 0 < n_words < k:  # a short document: one shingle, its whole word sequence
            _add_shingle(sig, d, _mix64(shingle), num_bins)
        if n_words == 0:
            exact[d] = 0
        else:
            key = _mix64(total ^ _mix64(np.uint64(n_words)))
            exact[d] = key if key != 0 else np.uint64(1)


@_jit
def band_keys_into(band, seed, empty, out):
    """minhash.band_key in one pass: per document (a row of `band`: its bins of one band), mix64 of the seed
    xor each bin in turn; 1 for a 0; 0 when every bin is `empty` (no key: never a candidate)."""
    for i in range(band.shape[0]):
        h = seed
        filled = False
        for r in range(band.shape[1]):
            v = band[i, r]
            filled = filled or v != empty
            h = _mix64(h ^ np.uint64(v))
        out[i] = (h if h != 0 else np.uint64(1)) if filled else np.uint64(0)


@_jit
def _band_pairs(col, keys, first, last, shift, mask, out):
    """minhash.band_pairs by a hash table (key -> first and last document seen with it) in one pass in document
    order: the same pairs as the sort, in another order. Returns how many rows of `out` it filled."""
    m = 0
    for i in range(len(col)):
        k = col[i]
        if k == 0:
            continue
        p = (k * TABLE_MULTIPLIER) >> shift
        while True:
            v = keys[p]
            if v == 0:
                keys[p], first[p], last[p] = k, i, i
                break
            if v == k:
                out[m, 0], out[m, 1] = first[p], i
                m += 1
                if last[p] != first[p]:
                    out[m, 0], out[m, 1] = last[p], i
                    m += 1
                last[p] = i
                break
            p = (p + _ONE) & mask
    return m


def band_pairs(col: np.ndarray) -> np.ndarray:
    """(m, 2) int64 pairs (i < j) of documents sharing a key of one band (`col`: a key per document, 0 = none):
    each document with the first and with the last earlier document holding its key (minhash.band_pairs'
    pairs, there from a stable sort of the keys, ~4x the time of this pass)."""
    col = np.ascontiguousarray(col, dtype=np.uint64)
    bits = max(10, int(np.count_nonzero(col)).bit_length() + 1)
    keys = np.zeros(1 << bits, dtype=np.uint64)
    first, last = np.empty(1 << bits, dtype=np.int64), np.empty(1 << bits, dtype=np.int64)
    out = np.empty((2 * len(col), 2), dtype=np.int64)
    m = _band_pairs(col, keys, first, last, np.uint64(64 - bits), np.uint64((1 << bits) - 1), out)
    return out[:m].copy()


@_jit
def pair_counts_into(band, pairs, empty, both, either):
    """Per pair (i, j) of documents: add to `both` the bins of `band` where they hold the same value, not
    `empty`, and to `either` the bins where one of them holds a value (minhash.estimate_jaccard's sums)."""
    for k in range(pairs.shape[0]):
        i, j = pairs[k, 0], pairs[k, 1]
        same, filled = 0, 0
        for r in range(band.shape[1]):
            x, y = band[i, r], band[j, r]
            same += (x == y) & (x != empty)
            filled += (x != empty) | (y != empty)
        both[k] += same
        either[k] += filled


@njit(inline="always")
def _passes(table, h, shift):
    s = h >> shift
    return (table[s >> _THREE] >> np.uint8(s & _SEVEN)) & np.uint8(1)


BLOOM_MULTIPLIER = np.uint64(0xD6E8FEB86659FD93)  # odd: its product's top bits mix every bit of the hash
_SIX = np.uint64(6)
_SIXTY_THREE = np.uint64(63)


@njit(inline="always")
def _bloom_word_and_mask(h, wshift):
    """A blocked Bloom filter's word for hash `h` (the product's top bits) and three bits in it (the next 18)."""
    x = h * BLOOM_MULTIPLIER
    b = x >> (wshift - np.uint64(18))
    mask = (_ONE << (b & _SIXTY_THREE)) | (_ONE << ((b >> _SIX) & _SIXTY_THREE))
    mask |= _ONE << ((b >> np.uint64(12)) & _SIXTY_THREE)
    return x >> wshift, mask


@_jit
def _build_bloom(keys, skip, words, wshift):
    use_skip = len(skip) > 0
    for i in range(len(keys)):
        if use_skip and skip[i]:
            continue
        w, mask = _bloom_word_and_mask(keys[i], wshift)
        words[w] |= mask


@njit(inline="always")
def _in_bloom(words, h, wshift):
    w, mask = _bloom_word_and_mask(h, wshift)
    return np.uint8((words[w] & mask) == mask)


@njit(inline="always")
def _probe(slots, h, shift, mask, zero_id):
    """Position of key `h` in the index's keys, or -1 (slots: (size, 2) of key, id; key 0 kept apart)."""
    if h == 0:
        return zero_id
    p = (h * TABLE_MULTIPLIER) >> shift
    while True:
        v = slots[p, 0]
        if v == h:
            return np.int64(slots[p, 1])
        if v == 0:
            return -1
        p = (p + _ONE) & mask


@_jit
def _build_slots(keys, slots, shift, mask):
    for i in range(len(keys)):
        h = keys[i]
        if h == 0:
            continue
        p = (h * TABLE_MULTIPLIER) >> shift
        while slots[p, 0] != 0:
            p = (p + _ONE) & mask
        slots[p, 0] = h
        slots[p, 1] = np.uint64(i)


@_jit
def _hash_key_ids(hashes, bloom, wshift, f1, fshift, slots, tshift, tmask, zero_id, skip, out):
    use_skip = len(skip) > 0
    for i in range(len(hashes)):
        h = hashes[i]
        out[i] = -1
        if not _in_bloom(bloom, h, wshift) or not _passes(f1, h * FILTER2_MULTIPLIER, fshift):
            continue
        key = _probe(slots, h, tshift, tmask, zero_id)
        if key >= 0 and not (use_skip and skip[key]):
            out[i] = key


BLOCK = 2048  # n-gram starts taken through each stage of _ngram_key_ids at a time


@_jit
def _ngram_key_ids(ids, n, special, base_n, bloom, wshift, f1, fshift, slots, tshift, tmask, zero_id, skip, out):
    """Per n-gram start of `ids`: the key id of its rolling hash, or -1 when it is not a key, a key marked in
    `skip`, or the n-gram holds an id marked in `special`. Returns how many keys found were skipped.
    Three stages per BLOCK starts: the hashes (a chain of multiply-adds), then the first filter's test of each
    (a loop of independent reads and no branch, so its cache misses overlap: in one loop with the hashing,
    and a branch on each result, the filter cost 2x as much), then for the few that pass, the second filter
    and the table."""
    base = NGRAM_BASE
    use_skip = len(skip) > 0
    skipped = 0
    m = len(ids) - n + 1
    hashes = np.empty(BLOCK, dtype=np.uint64)
    passed = np.empty(BLOCK, dtype=np.uint8)
    h = np.uint64(0)
    last_special = -1
    for j in range(n - 1):
        h = h * base + np.uint64(ids[j])
        if special[ids[j]]:
            last_special = j
    for lo in range(0, m, BLOCK):
        size = min(BLOCK, m - lo)
        for j in range(size):
            i = lo + j
            t = ids[i + n - 1]
            last_special = i + n - 1 if special[t] else last_special
            h = h * base + np.uint64(t)
            if i > 0:
                h -= np.uint64(ids[i - 1]) * base_n
            hashes[j] = h
            passed[j] = last_special < i
        for j in range(size):
            passed[j] &= _in_bloom(bloom, hashes[j], wshift)
        for j in range(size):
            out[lo + j] = -1
            if not passed[j]:
                continue
            g = hashes[j]
            if not _passes(f1, g * FILTER2_MULTIPLIER, fshift):
                continue
            key = _probe(slots, g, tshift, tmask, zero_id)
            if key >= 0:
                if use_skip and skip[key]:
                    skipped += 1
                else:
                    out[lo + j] = key
    return skipped


class CompiledIndex:
    """An `NgramIndex`'s keys looked up by the compiled loops: a blocked Bloom filter (three bits in one 64-bit
    word per key, ~4-8 bits per key: 4 MB for 5 M keys, where the index's first filter takes 16 MB, so it stays
    in cache; ~3-10 % of non-members pass), the index's second bit filter, then an open-addressing table of
    (key, id) pairs side by side (load <= 1/2: a member costs one cache line, where the numpy HashTable's
    separate key and id arrays cost two). `skip`: a bool per key (the waived ones, or those already counted
    past the limit): a skipped key answers -1; the caller may change it in place between calls."""

    def __init__(self, index: NgramIndex, skip: np.ndarray | None = None):
        self.index = index
        self.keys = index.keys
        self.skip = _NO_MASK if skip is None else skip
        self._filters = self._build_filters(_NO_MASK, index._filters[1])
        bits = max(10, int(len(self.keys)).bit_length() + 1)
        self._slots = np.zeros((1 << bits, 2), dtype=np.uint64)
        self._shift, self._mask = np.uint64(64 - bits), np.uint64((1 << bits) - 1)
        zero = np.flatnonzero(self.keys == 0)
        self._zero_id = int(zero[0]) if len(zero) else -1
        if len(self.keys):
            _build_slots(self.keys, self._slots, self._shift, self._mask)

    def __len__(self) -> int:
        return len(self.keys) - int(self.skip.sum()) if len(self.skip) else len(self.keys)

    def _build_filters(self, skip: np.ndarray, second: np.ndarray) -> tuple:
        """(Bloom words, their shift, the second filter, its shift) over the keys not marked in `skip`."""
        wbits = max(10, (len(self.keys) // 16).bit_length())
        words = np.zeros(1 << wbits, dtype=np.uint64)
        wshift = np.uint64(64 - wbits)
        if len(self.keys):
            _build_bloom(self.keys, skip, words, wshift)
        return words, wshift, second, self.index._shift

    def with_skip(self, skip: np.ndarray) -> CompiledIndex:
        """The same index answering -1 for the keys marked in `skip` (a bool per key), its table shared and its
        filters rebuilt over the other keys: an n-gram whose key is skipped mostly stops at a filter (a few MB,
        in cache) instead of a probe of the table (on the generated full-size data most train positions hold
        a waived key: ~3x faster there). `skip` may gain marks in place afterwards: such a key still passes
        the filters, and answers -1 at the table."""
        other = object.__new__(CompiledIndex)
        other.__dict__.update(self.__dict__)
        other.skip = skip
        index = self.index
        if skip.any():  # else the filters over every key serve (a rebuild over 5 M keys costs ~0.2 s)
            (second,) = index.filters_over(self.keys[~skip], which=(1,))
            other._filters = self._build_filters(skip, second)
        return other

    def key_ids(self, hashes: np.ndarray) -> np.ndarray:
        """Per hash: its position among the keys, or -1."""
        hashes = np.ascontiguousarray(hashes, dtype=np.uint64)
        out = np.empty(len(hashes), dtype=np.int64)
        if not len(self.keys):
            out.fill(-1)
            return out
        _hash_key_ids(hashes, *self._filters, self._slots, self._shift, self._mask, self._zero_id, self.skip, out)
        return out

    def ngram_key_ids(self, ids: np.ndarray, n: int, specials: np.ndarray) -> np.ndarray:
        """Per n-gram start of `ids` (len(ids) - n + 1 of them): the key id of the n-gram's hash
        (report/ngrams.py's rolling_hashes), or -1 (not a key, skipped, or it holds an id `specials` marks)."""
        return self.ngram_key_ids_counted(ids, n, specials)[0]

    def ngram_key_ids_counted(self, ids: np.ndarray, n: int, specials: np.ndarray) -> tuple[np.ndarray, int]:
        """(`ngram_key_ids`, how many of its n-grams were skipped keys that reached the table: what a
        `with_skip` rebuilt now would save)."""
        ids = np.ascontiguousarray(ids)
        out = np.empty(max(len(ids) - n + 1, 0), dtype=np.int64)
        if not len(out) or not len(self.keys):
            out.fill(-1)
            return out, 0
        skipped = _ngram_key_ids(
            ids, n, specials, _power(n), *self._filters, self._slots, self._shift, self._mask, self._zero_id,
            self.skip, out,
        )  # fmt: skip
        return out, int(skipped)

    def contains(self, hashes: np.ndarray) -> np.ndarray:
        return self.key_ids(hashes) >= 0
