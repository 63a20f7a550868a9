"""Generated documents with planted near-copies at known Jaccard levels (the dedup test and benchmark).

`planted_corpus(n_docs, seed)`: `n_docs` original documents of 80..600 words drawn (Zipf-like) from a
vocabulary of made-up words, then for every target level in LEVELS a set of copies of some originals,
each made by word edits (substitutions, insertions, deletions spread over the document) sized so that
the shingle Jaccard of copy and original lands near the level. Every copy's true Jaccard is measured
exactly (minhash.word_shingles on curation's normalized words), so results are binned by the truth, not
by the target. Documents come shuffled: a copy may come before its original.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from niels_gpt.curation.minhash import SHINGLE_WORDS, exact_jaccard, word_shingles
from niels_gpt.curation.words import normalized_words

LEVELS = (0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0)
_LETTERS = np.array(list("abcdefghijklmnoprstuvy"))


@dataclass
class Planted:
    texts: list[str]
    pairs: list[tuple[int, int, float]]  # (original, copy, true Jaccard) as indices into texts


def _vocabulary(rng, n: int) -> list[str]:
    lengths = rng.integers(2, 9, n)
    words = {"".join(rng.choice(_LETTERS, k)) for k in lengths}
    return sorted(words)


def _edit(words: list[str], target: float, vocab: list[str], rng) -> list[str]:
    """A copy whose shingle Jaccard with `words` is about `target`: each edit changes ~k shingles."""
    if target >= 1.0:
        return list(words)
    shingles = max(len(words) - SHINGLE_WORDS + 1, 1)
    changed = shingles * (1 - target) / (1 + target)  # J = (S - c) / (S + c)
    n_edits = max(1, round(changed / SHINGLE_WORDS))
    out = list(words)
    spots = sorted(rng.choice(len(out), size=min(n_edits, len(out)), replace=False).tolist(), reverse=True)
    for pos in spots:
        kind = rng.integers(3)
        if kind == 0:
            out[pos] = vocab[rng.integers(len(vocab))]
        elif kind == 1:
            out.insert(pos, vocab[rng.integers(len(vocab))])
        elif len(out) > 1:
            del out[pos]
    return out


def _sentence_text(words: list[str], rng) -> str:
    """Words joined with a little punctuation and case, as text (normalization must see through it)."""
    parts = []
    for i, w in enumerate(words):
        if i == 0 or rng.random() < 0.08:
            w = w.capitalize()
        if rng.random() < 0.07:
            w += rng.choice([",", ".", ";"])
        parts.append(w)
    return " ".join(parts)


def true_jaccard(a: str, b: str) -> float:
    return exact_jaccard(word_shingles(normalized_words(a)), word_shingles(normalized_words(b)))


def planted_corpus(n_docs: int = 300, seed: int = 0, copies_per_level: int = 30) -> Planted:
    rng = np.random.default_rng(seed)
    vocab = _vocabulary(rng, 4000)
    weights = 1.0 / np.arange(1, len(vocab) + 1) ** 0.8
    weights /= weights.sum()
    originals = []
    for _ in range(n_docs):
        n = int(rng.integers(80, 600))
        originals.append([vocab[i] for i in rng.choice(len(vocab), n, p=weights)])
    docs = [_sentence_text(w, rng) for w in originals]
    planted = []
    for level in LEVELS:
        for src in rng.choice(n_docs, copies_per_level, replace=False).tolist():
            copy = _sentence_text(_edit(originals[src], level, vocab, rng), rng)
            planted.append((src, len(docs), true_jaccard(docs[src], copy)))
            docs.append(copy)
    order = rng.permutation(len(docs))
    where = np.empty(len(docs), dtype=np.int64)
    where[order] = np.arange(len(docs))
    texts = [docs[i] for i in order]
    return Planted(texts, [(int(where[a]), int(where[b]), j) for a, b, j in planted])
