"""MinHash signatures of word 5-gram shingles, LSH banding, and the Jaccard estimate that confirms a pair.

Shingles: every run of `k` consecutive words of a document (k = 5), hashed (ngrams.rolling_hashes over the
word hashes, then mix64); a document of 1..k-1 words has one shingle, its whole word sequence.

Signature: one-permutation MinHash (Li, Owen & Zhang 2012). Each shingle hash s goes to bin
`(s >> 32) * K >> 32` of K = bands x rows bins and the bin keeps the smallest low 32 bits seen; a bin
nothing fell into stays EMPTY. One hash per shingle instead of K (classic MinHash computes K permutations
of every shingle): O(shingles) work, measured in benchmarks/bench_dedup.py. Empty bins are not densified:
the estimate below skips bins empty in both documents, so a short document is compared on the shingles it has.

Estimate of J(A, B) from two signatures: matching non-empty bins / bins non-empty in either. For documents
of many shingles this is classic MinHash's estimate with K samples (standard error sqrt(J(1-J)/K): 0.022
at J = 0.85 with K = 256); for short ones the bins are nearly the shingles themselves, so it is near exact.

Banding (LSH): the K bins form `bands` bands of `rows` bins; a band whose bins are all EMPTY is skipped,
the others hash to one uint64 key. Two documents become a candidate pair when any band key agrees:
P(candidate) = 1 - (1 - J^rows)^bands, with bands 32 x rows 8: 0.997 at J = 0.8, 0.99996 at J = 0.85 and
0.12 at J = 0.5. A candidate is kept only if its estimate reaches the threshold (0.8): the banding finds,
the estimate decides. Within a run of equal band keys, ordered by document index, each document is paired
with the run's first and with its predecessor (never all pairs: a thousand copies give 2,000 pairs, not 500,000).
"""

from __future__ import annotations

import numpy as np

from niels_gpt.curation.words import mix64
from niels_gpt.report.ngrams import rolling_hashes, sorted_unique

EMPTY = np.uint32(0xFFFFFFFF)
SHINGLE_WORDS = 5  # config: dedup.shingle_words
BANDS, ROWS = 32, 8  # config: dedup.bands, dedup.rows (K = 256 bins)
_BAND_SEED = np.uint64(0xD6E8FEB86659FD93)


def shingle_hashes(words: np.ndarray, word_doc: np.ndarray, n_docs: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(shingle hashes, document of each) for words `words` of documents `word_doc` (ascending, 0..n_docs-1)."""
    words = np.asarray(words, dtype=np.uint64)
    word_doc = np.asarray(word_doc, dtype=np.int64)
    counts = np.bincount(word_doc, minlength=n_docs)
    h = rolling_hashes(words, k)
    inside = word_doc[: len(h)] == word_doc[k - 1 :] if len(h) else np.zeros(0, dtype=bool)
    grams, gram_doc = mix64(h[inside]), word_doc[: len(h)][inside]
    short = np.flatnonzero((counts > 0) & (counts < k))  # a document shorter than k: its whole sequence
    if len(short):
        first = np.searchsorted(word_doc, short)
        whole = np.array([_sequence_hash(words[a : a + c]) for a, c in zip(first, counts[short])], dtype=np.uint64)
        at = np.searchsorted(gram_doc, short)  # a short document has no other shingle: put in its place
        grams, gram_doc = np.insert(grams, at, whole), np.insert(gram_doc, at, short)
    return grams, gram_doc


def _sequence_hash(words: np.ndarray) -> np.uint64:
    return mix64(rolling_hashes(words, len(words)))[0]


def signatures(grams: np.ndarray, gram_doc: np.ndarray, n_docs: int, num_bins: int) -> np.ndarray:
    """(n_docs, num_bins) uint32 one-permutation MinHash signatures (EMPTY where no shingle fell)."""
    sig = np.full(n_docs * num_bins, EMPTY, dtype=np.uint32)
    if len(grams):
        bins = (((grams >> np.uint64(32)) * np.uint64(num_bins)) >> np.uint64(32)).astype(np.int64)
        values = (grams & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        np.minimum.at(sig, gram_doc * num_bins + bins, values)
    return sig.reshape(n_docs, num_bins)


def band_keys(sig: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """(n_docs, bands) uint64 band keys; 0 for a band whose bins are all EMPTY (never a candidate)."""
    out = np.zeros((len(sig), bands), dtype=np.uint64)
    for b in range(bands):
        out[:, b] = band_key(sig[:, b * rows : (b + 1) * rows], b)
    return out


def band_key(band: np.ndarray, b: int) -> np.ndarray:
    """(n_docs,) uint64 keys of band number `b`, whose bins are the columns of `band` (n_docs, rows): per
    document, h = seed(b), then h = mix64(h ^ bin) for each bin in turn; 1 where that gives 0, and 0 (no key)
    where every bin is EMPTY. One compiled pass (compiled.band_keys_into; 8 numpy passes took ~10x as long)."""
    from niels_gpt.curation.compiled import band_keys_into

    out = np.zeros(len(band), dtype=np.uint64)
    if len(band):
        band_keys_into(np.ascontiguousarray(band, dtype=np.uint32), _band_seed(b), EMPTY, out)
    return out


def _band_seed(b: int) -> np.uint64:
    return np.uint64((b + 1) * int(_BAND_SEED) % (1 << 64))


def band_pairs(col: np.ndarray) -> list[np.ndarray]:
    """(m, 2) int64 pair arrays (i < j) of the documents that share a key of one band (`col`: one key per
    document, 0 = no key): among the documents holding one key, in document order, each with the first and
    with its predecessor (compiled.band_pairs: one pass through a hash table)."""
    from niels_gpt.curation.compiled import band_pairs as compiled_band_pairs

    pairs = compiled_band_pairs(col)
    return [pairs] if len(pairs) else []


def distinct_pairs(found: list[np.ndarray], n: int) -> np.ndarray:
    """The distinct pairs of `found` (arrays of (i, j) pairs of documents below `n`), sorted."""
    if not found:
        return np.zeros((0, 2), dtype=np.int64)
    pairs = np.concatenate(found)
    code = sorted_unique(pairs[:, 0] * np.int64(n) + pairs[:, 1])
    return np.stack([code // n, code % n], axis=1)


def candidate_pairs(keys: np.ndarray) -> np.ndarray:
    """(m, 2) int64 distinct pairs (i < j) of rows of `keys` (n_docs, bands) that share a band key."""
    n, bands = keys.shape
    return distinct_pairs([p for b in range(bands) for p in band_pairs(keys[:, b])], n)


def estimate_jaccard(sig_a: np.ndarray, sig_b: np.ndarray) -> np.ndarray:
    """Row-wise estimate of J from signatures: matching non-empty bins / bins non-empty in either."""
    full_a, full_b = sig_a != EMPTY, sig_b != EMPTY
    both = ((sig_a == sig_b) & full_a).sum(axis=-1)
    either = (full_a | full_b).sum(axis=-1)
    return np.divide(both, either, out=np.zeros(both.shape), where=either > 0)


def exact_jaccard(a: set, b: set) -> float:
    """|A & B| / |A | B| (1.0 for two empty sets): the truth the estimate is checked against."""
    return len(a & b) / len(a | b) if a or b else 1.0


def word_shingles(words: list[str], k: int = SHINGLE_WORDS) -> set[tuple[str, ...]]:
    """The shingle set of a word list, in Python (the reference)."""
    if len(words) < k:
        return {tuple(words)} if words else set()
    return {tuple(words[i : i + k]) for i in range(len(words) - k + 1)}
