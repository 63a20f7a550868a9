"""Which documents are duplicates, and which copy survives.

Every unit (a pretrain document, an SFT example) has a place in one global order, decided by the caller
(job.py: val splits before train splits, then the source priority, then the part, then stream order);
removal decisions depend on that order and the units only, never on chunking, parallelism or threads.

- exact: units whose exact key (`doc_keys`: the sequence of normalized words; `token_keys`: the token
  ids, for SFT's rendered prompt + reply) equals that of an earlier unit are removed; the first survives.
  A document with no word (nothing but punctuation or whitespace) has key 0 and is never a duplicate.
- near: among the exact survivors, a unit whose estimated Jaccard similarity (minhash.py) with an earlier
  surviving unit reaches the threshold is removed. Decided in order, so a unit is only ever removed in
  favour of one that stays (no chain of removals ends at a removed document).
"""

from __future__ import annotations

import numpy as np

from niels_gpt.curation.minhash import band_keys, candidate_pairs, estimate_jaccard, shingle_hashes, signatures
from niels_gpt.curation.words import WordTable, mix64
from niels_gpt.report.ngrams import sorted_unique

KEEP, EXACT, NEAR = 0, 1, 2
REASONS = {EXACT: "exact_duplicate", NEAR: "near_duplicate"}
_POSITION = np.uint64(0x9E3779B97F4A7C15)
PAIR_CHUNK = 1 << 14  # candidate pairs compared at once: 2 x 16 K x 256 x 4 bytes = 32 MB


def _ordered_sum(values: np.ndarray, unit_of: np.ndarray, starts: np.ndarray, n_units: int) -> np.ndarray:
    """Per unit: sum of mix64(value + position-in-unit * C) (mod 2**64), finalized; 0 for an empty unit."""
    values = np.asarray(values, dtype=np.uint64)
    pos = (np.arange(len(values)) - starts[unit_of]).astype(np.uint64)
    terms = mix64(values + pos * _POSITION)
    counts = np.bincount(unit_of, minlength=n_units).astype(np.uint64)
    total = np.zeros(n_units, dtype=np.uint64)
    filled = counts > 0
    if len(terms):
        total[filled] = np.add.reduceat(terms, starts[filled])
    keys = mix64(total ^ mix64(counts))
    keys[counts == 0] = 0
    keys[(keys == 0) & (counts > 0)] = 1
    return keys


def doc_keys(
    table: WordTable, ids: np.ndarray, doc_starts: np.ndarray, *, shingle_words: int, num_bins: int
) -> tuple[np.ndarray, np.ndarray]:
    """(exact key, MinHash signature) of each document of `ids` (documents begin at `doc_starts`, the
    first at 0; a document's eot, if any, is inside its range and holds no word)."""
    n_docs = len(doc_starts)
    words, first_token = table.word_hashes(ids, doc_starts)
    word_doc = np.searchsorted(doc_starts, first_token, side="right") - 1
    word_starts = np.searchsorted(word_doc, np.arange(n_docs))
    exact = _ordered_sum(words, word_doc, word_starts, n_docs)
    grams, gram_doc = shingle_hashes(words, word_doc, n_docs, shingle_words)
    return exact, signatures(grams, gram_doc, n_docs, num_bins)


def token_keys(ids: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Exact key of each unit of `ids` (units begin at `starts`): the sequence of its token ids."""
    n = len(starts)
    unit_of = np.searchsorted(starts, np.arange(len(ids)), side="right") - 1
    return _ordered_sum(np.asarray(ids, dtype=np.uint64), unit_of, np.asarray(starts), n)


def exact_duplicates(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(removed?, index of the surviving copy or -1) per unit: removed when an earlier unit has its key."""
    keys = np.asarray(keys, dtype=np.uint64)
    _, first = np.unique(keys, return_index=True)
    survivor = first[np.searchsorted(sorted_unique(keys), keys)]
    removed = (survivor != np.arange(len(keys))) & (keys != 0)
    return removed, np.where(removed, survivor, -1)


def near_duplicates(
    sig: np.ndarray, skip: np.ndarray, *, bands: int, rows: int, threshold: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(removed?, survivor or -1, estimated J or 0) per unit, among the units not in `skip`.
    `sig` (n, bands * rows) may be a memory map: rows are read in chunks of candidate pairs."""
    n = len(sig)
    keys = np.zeros((n, bands), dtype=np.uint64)
    for lo in range(0, n, PAIR_CHUNK):
        keys[lo : lo + PAIR_CHUNK] = band_keys(np.asarray(sig[lo : lo + PAIR_CHUNK]), bands, rows)
    keys[np.asarray(skip, dtype=bool)] = 0
    pairs = candidate_pairs(keys)
    del keys
    est = np.zeros(len(pairs))
    for lo in range(0, len(pairs), PAIR_CHUNK):
        p = pairs[lo : lo + PAIR_CHUNK]
        est[lo : lo + PAIR_CHUNK] = estimate_jaccard(np.asarray(sig[p[:, 0]]), np.asarray(sig[p[:, 1]]))
    close = est >= threshold
    pairs, est = pairs[close], est[close]
    order = np.lexsort((pairs[:, 0], pairs[:, 1]))  # by later unit, then earlier: decided in order
    removed = np.zeros(n, dtype=bool)
    survivor = np.full(n, -1, dtype=np.int64)
    similarity = np.zeros(n)
    for (i, j), e in zip(pairs[order].tolist(), est[order].tolist()):
        if not removed[j] and not removed[i]:
            removed[j], survivor[j], similarity[j] = True, i, e
    return removed, survivor, similarity


def deduplicate(
    keys: np.ndarray, sig: np.ndarray, *, bands: int, rows: int, threshold: float, near: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(reason per unit: KEEP, EXACT or NEAR; the surviving copy or -1; estimated J of a near duplicate).
    The survivor named is always kept: an exact copy of a unit that is itself a near duplicate points at
    the unit that stays."""
    exact, survivor = exact_duplicates(keys)
    reason = np.where(exact, EXACT, KEEP).astype(np.int8)
    similarity = np.zeros(len(reason))
    if near and len(reason):
        removed, near_survivor, similarity = near_duplicates(sig, exact, bands=bands, rows=rows, threshold=threshold)
        reason[removed] = NEAR
        survivor[removed] = near_survivor[removed]
        moved = exact & (reason[np.maximum(survivor, 0)] == NEAR)
        survivor[moved] = near_survivor[survivor[moved]]
    return reason, survivor, similarity
