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

import os
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from niels_gpt.curation.minhash import EMPTY, band_key, band_pairs, distinct_pairs, shingle_hashes, signatures
from niels_gpt.curation.words import WordTable, _powers, mix64
from niels_gpt.report.ngrams import _bounded_map, sorted_unique

KEEP, EXACT, NEAR = 0, 1, 2
REASONS = {EXACT: "exact_duplicate", NEAR: "near_duplicate"}
_POSITION = np.uint64(0x9E3779B97F4A7C15)


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
    first at 0; a document's eot, if any, is inside its range and holds no word). One compiled pass
    (compiled.doc_keys_into); the same values as `doc_keys_reference`, ~4x faster (benchmarks/bench_dedup.py)."""
    from niels_gpt.curation.compiled import doc_keys_into  # numba: loaded by the jobs that key documents only

    doc_starts = np.ascontiguousarray(doc_starts, dtype=np.int64)
    exact = np.zeros(len(doc_starts), dtype=np.uint64)
    sig = np.full((len(doc_starts), num_bins), EMPTY, dtype=np.uint32)
    if len(doc_starts):
        power = _powers(int(table.length.max(initial=0)))[table.length]  # B^(characters of each piece)
        ids = np.ascontiguousarray(ids)
        doc_keys_into(ids, doc_starts, table.starts, table.g, power, table.length, shingle_words, _POSITION, exact, sig)
    return exact, sig


def doc_keys_reference(
    table: WordTable, ids: np.ndarray, doc_starts: np.ndarray, *, shingle_words: int, num_bins: int
) -> tuple[np.ndarray, np.ndarray]:
    """`doc_keys` in whole-array numpy passes (words.py, minhash.py): the definition the compiled pass is
    tested and measured against."""
    n_docs = len(doc_starts)
    words, first_token = table.word_hashes(ids, doc_starts)
    # the document of each position: documents begun up to it, less one (a binary search per word: 2x slower)
    begun = np.bincount(np.asarray(doc_starts, dtype=np.int64), minlength=len(ids) + 1)[: len(ids)]
    word_doc = (np.cumsum(begun, out=begun) - 1)[first_token]
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


class SignatureFiles:
    """MinHash signatures on disk, band by band: one file per band of (documents, rows) uint32, appended a
    chunk of documents at a time in document order (`append`). Banding and the estimates read one band at a
    time with plain reads (`band`: rows x 4 bytes per document), never all signatures at once and never
    through a memory map, so what a job holds does not grow with the signatures (32 bytes per document for
    the default 8 rows; 1 KB per document for all 256 bins)."""

    def __init__(self, folder: str | os.PathLike, *, bands: int, rows: int):
        self._tmp = tempfile.TemporaryDirectory(dir=folder, suffix=".sig.tmp")
        self.bands, self.rows, self.n = bands, rows, 0
        self._paths = [os.path.join(self._tmp.name, f"band_{b:03d}") for b in range(bands)]
        self._files = [open(path, "wb") for path in self._paths]  # noqa: SIM115 (closed in `done`/`close`)

    def append(self, sig: np.ndarray) -> None:
        """Add the signatures (n, bands * rows) of the next documents."""
        for b, f in enumerate(self._files):
            f.write(np.ascontiguousarray(sig[:, b * self.rows : (b + 1) * self.rows]).tobytes())
        self.n += len(sig)

    def done(self) -> None:
        for f in self._files:
            f.close()

    def __len__(self) -> int:
        return self.n

    def band(self, b: int) -> np.ndarray:
        """(n, rows) uint32: the bins of band `b` of every document."""
        return np.fromfile(self._paths[b], dtype=np.uint32, count=self.n * self.rows).reshape(self.n, self.rows)

    def close(self) -> None:
        self.done()
        self._tmp.cleanup()

    def __enter__(self) -> SignatureFiles:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _band_of(sig, rows: int) -> Callable[[int], np.ndarray]:
    if isinstance(sig, SignatureFiles):
        return sig.band
    return lambda b: np.asarray(sig[:, b * rows : (b + 1) * rows])


def near_duplicates(
    sig: np.ndarray | SignatureFiles,
    skip: np.ndarray,
    *,
    bands: int,
    rows: int,
    threshold: float,
    num_threads: int = 1,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(removed?, survivor or -1, estimated J or 0) per unit, among the units not in `skip`.
    `sig`: (n, bands * rows) signatures, or SignatureFiles. One band at a time (bands on `num_threads`
    threads, taken in order): its keys give candidate pairs (minhash.band_pairs); then, for the distinct
    pairs, each band's matching and non-empty bins are counted (minhash.estimate_jaccard's sums, band by
    band: the same numbers)."""
    from niels_gpt.curation.compiled import pair_counts_into

    n = len(sig)
    band_of = _band_of(sig, rows)
    skip = np.asarray(skip, dtype=bool)

    def pairs_of_band(b: int) -> list[np.ndarray]:
        col = band_key(band_of(b), b)
        col[skip] = 0
        return band_pairs(col)

    def counts_of_band(b: int) -> tuple[np.ndarray, np.ndarray]:
        both, either = np.zeros(len(pairs), dtype=np.int32), np.zeros(len(pairs), dtype=np.int32)
        pair_counts_into(np.ascontiguousarray(band_of(b)), pairs, EMPTY, both, either)
        return both, either

    depth = 2 * max(1, num_threads)
    with ThreadPoolExecutor(max_workers=max(1, num_threads)) as pool:
        found: list[np.ndarray] = []
        for band_found in _bounded_map(pool, pairs_of_band, range(bands), depth):
            found += band_found
            if sum(len(p) for p in found) > 4 * n + (1 << 20):  # many copies: drop the repeats as we go
                found = [distinct_pairs(found, n)]
        pairs = distinct_pairs(found, n)
        del found
        both = np.zeros(len(pairs), dtype=np.int64)
        either = np.zeros(len(pairs), dtype=np.int64)
        if len(pairs):
            for band_both, band_either in _bounded_map(pool, counts_of_band, range(bands), depth):
                both += band_both
                either += band_either
    est = np.divide(both, either, out=np.zeros(len(pairs)), where=either > 0)
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
    keys: np.ndarray,
    sig: np.ndarray | SignatureFiles,
    *,
    bands: int,
    rows: int,
    threshold: float,
    near: bool = True,
    num_threads: int = 1,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(reason per unit: KEEP, EXACT or NEAR; the surviving copy or -1; estimated J of a near duplicate).
    The survivor named is always kept: an exact copy of a unit that is itself a near duplicate points at
    the unit that stays. `num_threads` work on bands (the result does not depend on it)."""
    exact, survivor = exact_duplicates(keys)
    reason = np.where(exact, EXACT, KEEP).astype(np.int8)
    similarity = np.zeros(len(reason))
    if near and len(reason):
        removed, near_survivor, similarity = near_duplicates(
            sig, exact, bands=bands, rows=rows, threshold=threshold, num_threads=num_threads
        )
        reason[removed] = NEAR
        survivor[removed] = near_survivor[removed]
        moved = exact & (reason[np.maximum(survivor, 0)] == NEAR)
        survivor[moved] = near_survivor[survivor[moved]]
    return reason, survivor, similarity
