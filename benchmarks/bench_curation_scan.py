"""Curation's passes over every train token: the compiled loops (niels_gpt/curation/compiled.py) against the
numpy definitions they replace, and the leakage scan with and without dropping the keys it has seen.

Data (synthetic, one seed): --val tokens of Zipf-distributed ids over the default 16,004-id vocabulary (the
protected side: its distinct 13-grams indexed), and two train sides of --train tokens in documents of
50..2,000 tokens: "distinct" (fresh ids: few n-grams shared with val) and "repeating" (90 % of the text
copies of val passages of 13..200 tokens, as the generated full-size hub data shares 13-grams nearly
everywhere). A word table of the same vocabulary (every id a piece of 1..8 characters, 30 % starting a word).

Contenders, interleaved over --rounds rounds (medians, ratio of medians; every round checks they agree):
  keys     dedup.doc_keys (compiled: one pass) vs dedup.doc_keys_reference (numpy: words, hashes, shingles,
           bins in whole-array passes), per train side;
  lookups  CompiledIndex.ngram_key_ids (rolling hash, filters and table probe per position, one pass) vs
           rolling_hashes + NgramIndex.key_ids + windows_touching (numpy), per train side;
  count    the same lookups with 90 % of the keys skipped (the waiver's count late in a split), filters as
           they were vs rebuilt over the live keys (CompiledIndex.with_skip), on the repeating side;
  scan     report/ngrams.scan_matches (drops seen keys from its filters as it goes) vs the same loop of
           NgramIndex.lookup without that (the scan as it was), on the repeating side, 1 thread.
Rates are train tokens per second of one thread.

    python -m benchmarks.bench_curation_scan [--val 5000000] [--train 20000000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from benchmarks.synthetic import FIRST_ORDINARY, SP, VOCAB
from niels_gpt.curation.compiled import CompiledIndex
from niels_gpt.curation.decontaminate import special_table
from niels_gpt.curation.dedup import doc_keys, doc_keys_reference
from niels_gpt.curation.words import WordTable, string_hash
from niels_gpt.report.ngrams import NgramIndex, rolling_hashes, scan_matches, sorted_unique, windows_touching

N = 13
CHUNK = 1 << 19


def zipf_ids(rng, size: int) -> np.ndarray:
    return (FIRST_ORDINARY + (rng.zipf(1.2, size) - 1) % (VOCAB - FIRST_ORDINARY)).astype(np.uint16)


def documents(rng, total: int) -> tuple[np.ndarray, np.ndarray]:
    """Document starts covering `total` tokens, each document ending in an eot."""
    lengths = rng.integers(50, 2000, total // 50)
    ends = np.cumsum(lengths)
    ends = np.append(ends[ends < total], total)
    return np.concatenate(([0], ends[:-1])).astype(np.int64), ends - 1


def train_sides(rng, val: np.ndarray, total: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    starts, eots = documents(rng, total)
    distinct = zipf_ids(rng, total)
    repeating = zipf_ids(rng, total)
    at = 0
    while at < total:  # 90 % of the positions: val passages
        length = int(rng.integers(N, 200))
        if rng.random() < 0.9:
            src = int(rng.integers(0, len(val) - length))
            take = min(length, total - at)
            repeating[at : at + take] = val[src : src + take]
        at += length
    sides = {}
    for name, ids in (("distinct", distinct), ("repeating", repeating)):
        ids[eots] = SP["eot"]
        sides[name] = (ids, starts)
    return sides


def word_table(rng) -> WordTable:
    length = rng.integers(1, 9, VOCAB)
    g = np.array([string_hash("x" * int(k) + str(i)) for i, k in enumerate(length)], dtype=np.uint64)
    starts = rng.random(VOCAB) < 0.3
    starts[list(SP.values())] = True
    length[list(SP.values())] = 0
    g[list(SP.values())] = 0
    return WordTable(starts, g, length.astype(np.int64))


def chunks(ids: np.ndarray):
    for lo in range(0, len(ids) - N + 1, CHUNK):
        yield ids[lo : lo + CHUNK + N - 1]


def timed(fn) -> tuple[float, object]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def race(name: str, tokens: int, contenders: dict, rounds: int, same) -> None:
    seconds = {k: [] for k in contenders}
    for _ in range(rounds):
        results = {}
        for k, fn in contenders.items():
            s, results[k] = timed(fn)
            seconds[k].append(s)
        first, *rest = results.values()
        assert all(same(first, r) for r in rest), f"{name}: the contenders disagree"
    rates = {k: tokens / statistics.median(v) / 1e6 for k, v in seconds.items()}
    (ref, ref_rate), *others = rates.items()
    for k, r in others:
        print(f"  {name:<34} {k:<28} {r:7.1f} M tok/s   {ref:<28} {ref_rate:7.1f} M tok/s   {r / ref_rate:5.2f}x")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--val", type=int, default=5_000_000, help="protected tokens (default 5 M)")
    ap.add_argument("--train", type=int, default=20_000_000, help="tokens per train side (default 20 M)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    val = zipf_ids(rng, args.val)
    sides = train_sides(rng, val, args.train)
    table = word_table(rng)
    specials = special_table(SP.values())
    index = NgramIndex(sorted_unique(rolling_hashes(val, N)))
    compiled = CompiledIndex(index)
    print(f"{args.val:,} val tokens ({len(index):,} distinct {N}-grams); train sides of {args.train:,} tokens")
    doc_keys(table, sides["distinct"][0][:10_000], sides["distinct"][1][:1], shingle_words=5, num_bins=256)  # compile

    def keys(fn, ids, starts):
        return lambda: [fn(table, ids[a:b], starts[(starts >= a) & (starts < b)] - a, shingle_words=5, num_bins=256)
                        for a, b in doc_bounds(starts, len(ids))]  # fmt: skip

    def doc_bounds(starts, total, size=1 << 22):
        cut = [0]
        for s in starts[1:]:
            if s - cut[-1] >= size:
                cut.append(int(s))
        return list(zip(cut, cut[1:] + [total]))

    def same_keys(a, b):
        return all(np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1]) for x, y in zip(a, b))

    def numpy_ids(ids, idx=index, skip=None):
        def run():
            out = []
            for c in chunks(ids):
                key = idx.key_ids(rolling_hashes(c, N))
                key[windows_touching(specials[c], N)] = -1
                if skip is not None:
                    key[(key >= 0) & skip[np.maximum(key, 0)]] = -1
                out.append(key)
            return out

        return run

    def compiled_ids(ids, idx):
        return lambda: [idx.ngram_key_ids(c, N, specials) for c in chunks(ids)]

    def same_ids(a, b):
        return all(np.array_equal(x, y) for x, y in zip(a, b))

    for side, (ids, starts) in sides.items():
        race(f"keys, {side}", len(ids), {"numpy": keys(doc_keys_reference, ids, starts),
             "compiled": keys(doc_keys, ids, starts)}, args.rounds, same_keys)  # fmt: skip
    for side, (ids, _) in sides.items():
        race(f"lookups, {side}", len(ids), {"numpy": numpy_ids(ids), "compiled": compiled_ids(ids, compiled)},
             args.rounds, same_ids)  # fmt: skip
    ids = sides["repeating"][0]
    skip = np.random.default_rng(1).random(len(index)) < 0.9
    stale = CompiledIndex(index)
    stale.skip = skip  # the filters as they were before the keys went over
    race("count, 90 % of keys skipped", len(ids), {"numpy": numpy_ids(ids, skip=skip),
         "compiled, filters as they were": compiled_ids(ids, stale),
         "compiled, filters rebuilt": compiled_ids(ids, compiled.with_skip(skip))}, args.rounds, same_ids)  # fmt: skip

    def scan_as_it_was():
        seen = np.zeros(len(index), dtype=bool)
        for c in chunks(ids):
            seen[index.lookup(rolling_hashes(c, N))] = True
        return seen

    race("scan, repeating", len(ids), {"lookup per chunk (as it was)": scan_as_it_was,
         "scan_matches (drops seen keys)": lambda: scan_matches(ids, N, index, num_threads=1)},
         args.rounds, np.array_equal)  # fmt: skip


if __name__ == "__main__":
    main()
