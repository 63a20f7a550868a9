"""Near-duplicate detection: quality on planted near-copies, and speed against a classic MinHash reference.

Data: `tests.support.planted.planted_corpus` (--docs originals of 80..600 made-up words, plus copies made by
word edits at Jaccard levels 0.5 .. 1.0, each copy's true shingle Jaccard measured exactly), tokenized with
a SentencePiece model trained on it (vocabulary --vocab).

Candidate (what the pipeline runs): `dedup.doc_keys` on the token ids (normalized word hashes, word
5-gram shingles, one-permutation MinHash of 256 bins) + `dedup.deduplicate` (exact keys, LSH 32 bands x 8
rows, estimate >= 0.8). Reference: classic MinHash as the textbook (and datasketch) computes it, on the
text: normalized words in Python, each shingle hashed (crc32), 256 hash functions (a*h + b) >> 32 applied
to every shingle with numpy, min per function; then the same banding, estimate and greedy decision.

Quality (both methods): recall = planted pairs with true J >= 0.85 (and >= 0.8) of which one copy was
removed; every removed document is checked exactly against the copy it was removed for: precision = the
share with true J >= 0.8, and the count below 0.7. Speed: documents and MB of text per second (the
candidate's time excludes tokenizing, which the build does anyway), interleaved over --rounds, medians.

    python -m benchmarks.bench_dedup [--docs 3000] [--copies 300] [--rounds 3] [--vocab 2000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np

from niels_gpt.curation.dedup import KEEP, deduplicate, doc_keys
from niels_gpt.curation.minhash import BANDS, ROWS, SHINGLE_WORDS, word_shingles
from niels_gpt.curation.words import WordTable, normalized_words
from niels_gpt.tokenizer import SentencePieceTokenizer
from niels_gpt.tokenizer.train import train_sentencepiece
from tests.support.planted import planted_corpus, true_jaccard

BINS = BANDS * ROWS
THRESHOLD = 0.8


def candidate(table, ids, starts):
    keys, sig = doc_keys(table, ids, starts, shingle_words=SHINGLE_WORDS, num_bins=BINS)
    return deduplicate(keys, sig, bands=BANDS, rows=ROWS, threshold=THRESHOLD)


def reference(texts):
    rng = np.random.default_rng(1)
    a = rng.integers(1, 1 << 63, BINS, dtype=np.uint64) | np.uint64(1)
    b = rng.integers(0, 1 << 63, BINS, dtype=np.uint64)
    sig = np.empty((len(texts), BINS), dtype=np.uint32)
    keys = np.zeros(len(texts), dtype=np.uint64)
    for i, text in enumerate(texts):
        words = normalized_words(text)
        keys[i] = zlib.crc32(" ".join(words).encode()) + 1 if words else 0
        h = np.array([zlib.crc32(" ".join(s).encode()) for s in word_shingles(words)], dtype=np.uint64)
        sig[i] = ((h[:, None] * a[None, :] + b[None, :]) >> np.uint64(32)).min(axis=0) if len(h) else 0xFFFFFFFF
    return deduplicate(keys, sig, bands=BANDS, rows=ROWS, threshold=THRESHOLD)


def quality(planted, reason, survivor) -> dict:
    removed = reason != KEEP
    out = {}
    for lo in (0.85, 0.8):
        pairs = [(a, b) for a, b, j in planted.pairs if j >= lo]
        out[f"recall@{lo}"] = sum(bool(removed[a] or removed[b]) for a, b in pairs) / len(pairs)
    truth = [true_jaccard(planted.texts[d], planted.texts[survivor[d]]) for d in np.flatnonzero(removed)]
    out["removed"] = int(removed.sum())
    out["precision@0.8"] = sum(t >= THRESHOLD for t in truth) / max(len(truth), 1)
    out["below_0.7"] = sum(t < 0.7 for t in truth)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=3000, help="original documents (default 3000)")
    ap.add_argument("--copies", type=int, default=300, help="planted copies per Jaccard level (default 300)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds (default 3)")
    ap.add_argument("--vocab", type=int, default=2000, help="tokenizer vocabulary (default 2000)")
    args = ap.parse_args()
    planted = planted_corpus(args.docs, seed=0, copies_per_level=args.copies)
    texts = planted.texts
    mb = sum(len(t.encode()) for t in texts) / 1e6
    with tempfile.TemporaryDirectory() as tmp:
        tok = SentencePieceTokenizer(
            train_sentencepiece(texts[:2000], Path(tmp) / "spm.model", vocab_size=args.vocab).model_path
        )
    enc = tok.encode_batch(texts, num_threads=2)
    starts = np.cumsum([0] + [len(e) + 1 for e in enc])[:-1]
    ids = np.concatenate([np.append(e, tok.eot_id) for e in enc]).astype(np.uint16)
    table = WordTable.from_tokenizer(tok)
    print(
        f"{len(texts):,} documents ({len(planted.pairs):,} planted copies), {mb:,.1f} MB of text, {len(ids):,} tokens"
    )
    times = {"candidate": [], "reference": []}
    results = {}
    for _ in range(args.rounds):
        for name, fn in (("candidate", lambda: candidate(table, ids, starts)), ("reference", lambda: reference(texts))):
            t0 = time.perf_counter()
            results[name] = fn()
            times[name].append(time.perf_counter() - t0)
    for name in ("candidate", "reference"):
        reason, survivor, _ = results[name]
        q = quality(planted, reason, survivor)
        t = statistics.median(times[name])
        print(
            f"{name:9s}: {len(texts) / t:10,.0f} docs/s {mb / t:7.2f} MB/s (median of {args.rounds}: {t:.2f} s)  "
            + "  ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in q.items())
        )
    speedup = statistics.median(r / c for r, c in zip(times["reference"], times["candidate"]))
    print(f"candidate / reference speed: {speedup:.1f}x (median of per-round ratios)")


if __name__ == "__main__":
    main()
