"""Decontamination: the token n-grams no train unit may share with a protected text, and the cuts.

Protected texts: every val split of every pretrain and SFT cache (after deduplication and the budget
cut, i.e. exactly what the finished caches hold) and the files of `decontamination.benchmarks`, tokenized
with the project tokenizer. Their n-grams (n = leakage.n_tokens, 13: the audit's, so the certificate
checks what was removed) are the leakage audit's: inside one unit, no special id; hashed and indexed
by report/ngrams.py.

Train units: a pretrain document keeps its text outside the protected n-grams: every position covered by
a protected n-gram is cut out, and each remaining stretch becomes a document of its own (its own eot, so
no n-gram forms across a cut) if it holds at least `min_piece_tokens` tokens; shorter stretches are dropped.
A span cut keeps the rest of a long document (a book that quotes one val sentence keeps all but that
sentence); a whole-document rule would drop the book. An SFT example that holds a protected n-gram is
removed whole: a cut inside a conversation would leave a reply without its question.
"""

from __future__ import annotations

import numpy as np

from niels_gpt.report.ngrams import NgramIndex, rolling_hashes, sorted_unique, windows_touching

CONTAMINATION = "contamination"


def special_table(special_ids) -> np.ndarray:
    table = np.zeros(1 << 16, dtype=bool)
    table[list(special_ids)] = True
    return table


def unit_ngrams(ids: np.ndarray, n: int, specials: np.ndarray) -> np.ndarray:
    """Hashes of the n-grams of `ids` that hold no special id (so none crosses a unit's eot or role id)."""
    ids = np.asarray(ids)
    h = rolling_hashes(ids, n)
    return h[~windows_touching(specials[ids], n)] if len(h) else h


def protected_index(hash_arrays: list[np.ndarray]):
    """One index over the n-gram hashes of every protected text, for the compiled lookups
    (compiled.CompiledIndex over an NgramIndex; numba is imported here, by the jobs that scan, only)."""
    from niels_gpt.curation.compiled import CompiledIndex

    return CompiledIndex(NgramIndex(sorted_unique(np.concatenate([np.zeros(0, np.uint64), *hash_arrays]))))


def covered(ids: np.ndarray, index, n: int, specials: np.ndarray) -> np.ndarray:
    """Bool per position of `ids`: inside an n-gram (holding no special id) that `index` (a
    compiled.CompiledIndex: `protected_index`, or one `with_skip` the waived keys) protects."""
    ids = np.asarray(ids)
    out = np.zeros(len(ids), dtype=bool)
    if len(ids) < n or not len(index):
        return out
    starts = np.flatnonzero(index.ngram_key_ids(ids, n, specials) >= 0)
    if len(starts) * n <= len(ids):  # few: mark the n positions of each
        for k in range(n):
            out[starts + k] = True
        return out
    depth = np.zeros(len(ids) + 1, dtype=np.int64)  # many: +1 where an n-gram starts, -1 past its end
    depth[starts] = 1
    depth[starts + n] -= 1
    return np.cumsum(depth[:-1]) > 0


def kept_pieces(mask: np.ndarray, min_piece: int) -> list[tuple[int, int]]:
    """[start, end) of every run of False in `mask` at least `min_piece` long."""
    edges = np.flatnonzero(np.diff(np.concatenate(([1], mask.astype(np.int8), [1]))))
    starts, ends = edges[0::2], edges[1::2]
    return [(int(a), int(b)) for a, b in zip(starts, ends) if b - a >= max(min_piece, 1)]


def unit_pieces(
    mask: np.ndarray, a: np.ndarray, b: np.ndarray, min_piece: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`kept_pieces` of many units at once: for the disjoint ranges [a[j], b[j]) of `mask` (ascending), every
    run of False inside one range at least `min_piece` long, as (j, start, end) arrays, start and end
    relative to a[j], in order. A run never crosses a range boundary."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    depth = np.zeros(len(mask) + 1, dtype=np.int64)
    np.add.at(depth, a, 1)
    np.add.at(depth, b, -1)
    free = np.zeros(len(mask) + 2, dtype=np.int8)  # padded by one False on each side
    free[1:-1] = (np.cumsum(depth[:-1]) > 0) & ~mask
    edges = np.diff(free)
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    # a run spanning two adjacent ranges (b[j] == a[j + 1], no separator between them) is split at a[j + 1]
    joined = a[np.isin(a, b)]
    joined = joined[free[joined] & free[joined + 1] > 0]
    if len(joined):
        starts, ends = np.sort(np.concatenate([starts, joined])), np.sort(np.concatenate([ends, joined]))
    unit = np.searchsorted(a, starts, side="right") - 1
    keep = ends - starts >= max(min_piece, 1)
    unit, starts, ends = unit[keep], starts[keep], ends[keep]
    return unit, starts - a[unit], ends - a[unit]
