"""Leakage audit: train tokens scanned per second against simple references, and peak RSS against the
sizes of the train and the val side.

(a) Throughput. Val side: --val tokens (default 5 M, the fineweb-edu val budget) of Zipf-distributed
ids over a 16,004-id vocabulary, hashed and indexed once (`NgramIndex`). Train side: uint16 shards on
disk holding --train tokens of the same distribution, with val segments copied in (so that matches
exist). Candidates: `scan_matches` (reads the shards with plain reads) on 2 threads and on 1.
References, on the first --ref-tokens of the train side (they are slow or memory-hungry):
  python  a set of the val 13-grams as bytes and a loop over train positions (the obvious code);
  numpy   every train hash in memory at once, then a binary search (`np.searchsorted`) of each in the
          sorted val hashes (vectorized, but memory grows with the train side, and every search is a
          chain of cache misses).
All of them must agree on which val n-grams occur in the scanned train tokens (checked every round).
Only the train side is timed: each method's val side (index, sorted hashes, set) is built untimed; the
Python set (~0.5 GB of small objects) is dropped before the candidates run, as it slows everything else.
Reference and candidates are interleaved over --rounds rounds; rates are train tokens per wall second;
medians, and ratios of medians.

(b) Memory. Each (val, train) size pair is scanned in a fresh subprocess that reports its own peak RSS
(VmHWM). Bounded by the val side = the same peak for 10 M and 100 M train tokens, growing with --val.

    python -m benchmarks.bench_leakage [--rounds 5] [--val 5000000] [--train 20000000] [--ref-tokens 1000000] \\
        [--rss-train 10000000 100000000] [--rss-val 1000000 5000000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.timing import peak_rss_mb
from niels_gpt.report.ngrams import NgramIndex, rolling_hashes, scan_matches
from niels_gpt.token_files import TOKEN_DTYPE, DiskSequence

N = 13
VOCAB = 16_004
SHARD_TOKENS = 10_000_000  # 20 MB shards: several per split, so n-grams cross shard boundaries
PLANTED_EVERY = 1_000_000  # one 2,000-token val segment copied into the train side per 1 M tokens


def zipf_ids(n: int, seed: int) -> np.ndarray:
    """n ids with a Zipf-like frequency profile (rank r drawn with probability ~ 1/r), ids >= 5 as in a cache."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, VOCAB - 4)
    cdf = np.cumsum(p / p.sum())
    return (np.searchsorted(cdf, rng.random(n)) + 5).astype(TOKEN_DTYPE)


def write_split(folder: Path, tokens: int, val: np.ndarray, seed: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for k, lo in enumerate(range(0, tokens, SHARD_TOKENS)):
        shard = zipf_ids(min(SHARD_TOKENS, tokens - lo), seed + k)
        for pos in range(0, len(shard) - 2000, PLANTED_EVERY):
            start = (pos * 7919) % (len(val) - 2000)
            shard[pos : pos + 2000] = val[start : start + 2000]
        shard.tofile(folder / f"shard_{k:05d}.bin")
        paths.append(folder / f"shard_{k:05d}.bin")
    return paths


def val_gram_set(val: np.ndarray) -> set[bytes]:
    return {val[i : i + N].tobytes() for i in range(len(val) - N + 1)}


def reference_python(grams: set[bytes], train: np.ndarray) -> set[bytes]:
    """The val n-grams (as bytes) that occur in `train`, by a set lookup per train position."""
    raw = train.tobytes()
    width = N * train.itemsize
    return {raw[j : j + width] for j in range(0, len(raw) - width + 1, train.itemsize) if raw[j : j + width] in grams}


def reference_numpy(keys: np.ndarray, train: np.ndarray) -> np.ndarray:
    """Sorted distinct val hashes that occur in `train`: all train hashes at once, then a binary search
    of each in the sorted val hashes."""
    h = rolling_hashes(train, N)
    pos = np.minimum(np.searchsorted(keys, h), len(keys) - 1)
    return np.unique(h[keys[pos] == h])


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def child(args) -> None:
    """Index --child-val tokens of val.bin, scan the first --child-train tokens of the train shards; print JSON."""
    val = DiskSequence([Path(args.data) / "val.bin"]).read(0, args.child_val)
    index, _ = NgramIndex.from_hashes(rolling_hashes(val, N))
    del val
    shards = sorted((Path(args.data) / "train").glob("shard_*.bin"))[: -(-args.child_train // SHARD_TOKENS)]
    seq = DiskSequence(shards)
    seconds, seen = timed(lambda: scan_matches(seq, N, index, num_threads=2))
    print(json.dumps({"train": len(seq), "seconds": seconds, "found": int(seen.sum()), "rss_mb": peak_rss_mb()}))


def throughput(args, val: np.ndarray, shards: list[Path]) -> None:
    index, _ = NgramIndex.from_hashes(rolling_hashes(val, N))
    seq = DiskSequence(shards)
    ref_train = seq.read(0, args.ref_tokens)
    print(f"val: {len(val):,} tokens, {len(index):,} distinct {N}-grams, index {index.nbytes / 1e6:.1f} MB")
    print(f"train: {len(seq):,} tokens in {len(shards)} shards; references scan the first {len(ref_train):,}")
    runs: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        grams = val_gram_set(val)  # built untimed, and dropped before the candidates run: ~0.5 GB of objects
        t_py, found_py = timed(lambda g=grams: reference_python(g, ref_train))
        del grams
        t_np, found_np = timed(lambda: reference_numpy(index.keys, ref_train))
        seen_ref = scan_matches(ref_train, N, index)
        assert set(index.keys[seen_ref].tolist()) == set(found_np.tolist()) and len(found_py) == len(found_np)
        for name, threads in (("scan_matches 2 threads", 2), ("scan_matches 1 thread", 1)):
            seconds, _ = timed(lambda t=threads: scan_matches(seq, N, index, num_threads=t))
            runs.setdefault(name, []).append(len(seq) / seconds)
        runs.setdefault("reference: python set loop", []).append(len(ref_train) / t_py)
        runs.setdefault("reference: numpy searchsorted", []).append(len(ref_train) / t_np)
    for name, rates in runs.items():
        vs_py = statistics.median(r / b for r, b in zip(rates, runs["reference: python set loop"]))
        vs_np = statistics.median(r / b for r, b in zip(rates, runs["reference: numpy searchsorted"]))
        print(
            f"{name:30s} {statistics.median(rates) / 1e6:7.2f} M train tokens/s "
            f"(min {min(rates) / 1e6:6.2f}, max {max(rates) / 1e6:6.2f})  "
            f"x{vs_py:5.1f} python loop, x{vs_np:5.1f} numpy searchsorted"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--val", type=int, default=5_000_000, help="val tokens for the throughput runs")
    ap.add_argument("--train", type=int, default=20_000_000, help="train tokens for the throughput runs")
    ap.add_argument("--ref-tokens", type=int, default=1_000_000, help="train tokens the references scan")
    ap.add_argument("--rss-train", type=int, nargs="*", default=[10_000_000, 100_000_000])
    ap.add_argument("--rss-val", type=int, nargs="*", default=[1_000_000, 5_000_000])
    ap.add_argument("--data", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child-val", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child-train", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child_val is not None:
        return child(args)
    with tempfile.TemporaryDirectory(prefix="bench_leakage_") as tmp:
        data = Path(tmp)
        val = zipf_ids(max([args.val, *args.rss_val]), seed=0)
        val.tofile(data / "val.bin")
        shards = write_split(data / "train", max([args.train, *args.rss_train]), val, seed=100)
        throughput(args, val[: args.val], shards[: -(-args.train // SHARD_TOKENS)])
        for n_val in args.rss_val:
            for n_train in args.rss_train:
                cmd = [sys.executable, "-m", "benchmarks.bench_leakage", "--data", str(data)]
                cmd += ["--child-val", str(n_val), "--child-train", str(n_train)]
                res = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
                print(
                    f"val {n_val:>11,} tokens, train {res['train']:>12,}: {res['seconds']:6.1f} s "
                    f"({res['train'] / res['seconds'] / 1e6:5.1f} M tokens/s), peak RSS {res['rss_mb']:7.1f} MB"
                )


if __name__ == "__main__":
    main()
