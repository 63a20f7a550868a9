"""Epoch-mode MixedLoader: cost per batch against random mode, and the cost of building its plan.

1. Batches (B=32, T=1024 by default), `next(loader)` of MixedLoader(mode="epoch") vs the same loader
   in mode="random", interleaved over several rounds; medians and the ratio epoch / random (target
   <= 1.3x):
     pretrain x3  three synthetic uint16 pretrain sources mixed 0.6/0.3/0.1 (bench_loader's data);
     pretrain x1  one of them alone;
     sft x2       two synthetic SFT caches (benchmarks/synthetic.py) mixed 0.7/0.3.
2. The plan for N items, N = 10^3 ... 10^12: building one source's epoch order and this rank's cursor
   and reading its first B items (EpochPermutation + RankCursor.take), wall time (median) and peak
   memory traced by tracemalloc; against the table a shuffled-index epoch needs (`torch.randperm(N)`:
   its time and its N * 8 bytes), up to N = 10^7. Then a whole MixedLoader(mode="epoch") over a
   pretrain source of 10^6 windows and one of 10^9 windows of T=1024 tokens (a sparse shard of
   1,024,000,000,001 tokens: 2 TB of address space, no disk used; a batch reads only its pages):
   construction + first batch, time and traced peak.

    python -m benchmarks.bench_epoch_loader [--B 32] [--T 1024] [--rounds 7] [--seconds 0.5] [--skip-plan]
"""

from __future__ import annotations

import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

import torch

from benchmarks.bench_loader import MIX
from benchmarks.synthetic import write_sft_cache, write_shards
from benchmarks.timing import batch_arguments, interleaved_rates, ratios, spread
from niels_gpt.cache.loader import MixedLoader
from niels_gpt.cache.pretrain_dataset import PretrainTokenStreamDataset
from niels_gpt.cache.sft_dataset import SFTExampleDataset
from niels_gpt.training.epoch_order import EpochPermutation, RankCursor

SFT_MIX = {"dolly15k": 0.3, "oasst1": 0.7}
PLAN_SIZES = [10**3, 10**6, 10**9, 10**12]
RANDPERM_SIZES = [10**3, 10**5, 10**6, 10**7]  # 10^7 int64 = 80 MB already; 10^9 would be 8 GB


def compare(label: str, sources: dict, p: dict, B: int, rounds: int, seconds: float) -> float:
    """Median us per batch of each mode, interleaved; prints and returns the median ratio epoch / random."""
    loaders = {mode: MixedLoader(sources, p=p, B=B, seed=0, mode=mode) for mode in ("random", "epoch")}
    rates = interleaved_rates(
        {mode: (lambda loader=loader: next(loader)) for mode, loader in loaders.items()}, rounds, seconds
    )
    r, e = (1e6 / statistics.median(rates[mode]) for mode in ("random", "epoch"))
    per_round = ratios(rates["random"], rates["epoch"])
    print(f"{label:12s}: random {r:8.1f} us/batch | epoch {e:8.1f} us/batch | ratio {spread(per_round)}")
    return statistics.median(per_round)


def timed_peak(fn, repeats: int = 5) -> tuple[float, int]:
    """(median seconds of fn(), peak bytes tracemalloc saw during one call)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return statistics.median(times), peak


def plan_scaling(B: int) -> None:
    print("\nplan of one source: build the epoch order + this rank's cursor, read the first B items")
    for n in PLAN_SIZES:
        seconds, peak = timed_peak(lambda n=n: RankCursor(n, 42, rank=1, world_size=8).take(B))
        bits = 2 * EpochPermutation(n, 42, 0).half_bits
        print(f"  N = {n:>17,}: {seconds * 1e3:7.2f} ms, peak {peak / 1024:7.1f} KiB (Feistel domain 2^{bits})")
    print("reference: torch.randperm(N), the table an index-shuffling epoch holds")
    for n in RANDPERM_SIZES:
        seconds, _ = timed_peak(lambda n=n: torch.randperm(n), repeats=3)
        print(f"  N = {n:>17,}: {seconds * 1e3:7.2f} ms, table {n * 8 / 2**20:9.2f} MiB")


def loader_at_scale(tmp: Path, B: int, T: int) -> None:
    print(f"\nMixedLoader(mode='epoch') over one pretrain source, B={B}, T={T}: construction + first batch")
    for windows in (10**6, 10**9):
        split = tmp / f"windows_{windows}" / "train"
        split.mkdir(parents=True)
        with open(split / "shard_00000.bin", "wb") as f:
            f.truncate(2 * (windows * T + 1))  # sparse: no disk used, pages read back as zeros

        def build_and_read(split=split):
            ds = PretrainTokenStreamDataset(split, T=T)
            next(MixedLoader({"big": ds}, p={"big": 1.0}, B=B, seed=0, mode="epoch"))
            return ds

        seconds, peak = timed_peak(build_and_read)
        ds = build_and_read()
        print(
            f"  {len(ds):>13,} windows ({ds.n_tokens:,} tokens): {seconds * 1e3:7.2f} ms, peak {peak / 2**20:6.2f} MiB"
        )


def main() -> None:
    ap = batch_arguments(__doc__)
    ap.add_argument("--tokens", type=int, default=5_000_000, help="tokens per pretrain source (one shard each)")
    ap.add_argument("--examples", type=int, default=20_000, help="examples per synthetic SFT source")
    ap.add_argument("--skip-plan", action="store_true", help="batches only")
    args = ap.parse_args()
    torch.set_num_threads(1)
    B, T = args.B, args.T

    with tempfile.TemporaryDirectory(prefix="bench_epoch_") as tmp:
        tmp = Path(tmp)
        for k, name in enumerate(MIX):
            write_shards(tmp / name, [args.tokens], seed=k)
        pretrain = {name: PretrainTokenStreamDataset(tmp / name, T=T) for name in MIX}
        for k, name in enumerate(SFT_MIX):
            write_sft_cache(tmp / "sft" / name, args.examples, seed=k)
        sft = {name: SFTExampleDataset.from_cache_dir(tmp / "sft" / name, "train", T=T) for name in SFT_MIX}
        print(
            f"B={B} T={T}; pretrain: {len(MIX)} sources of {args.tokens:,} tokens; SFT: {len(SFT_MIX)} sources of "
            f"{args.examples:,} examples; torch threads 1; {args.rounds} rounds x {args.seconds}s per mode"
        )
        compare("pretrain x3", pretrain, MIX, B, args.rounds, args.seconds)
        compare(
            "pretrain x1", {"fineweb_edu": pretrain["fineweb_edu"]}, {"fineweb_edu": 1.0}, B, args.rounds, args.seconds
        )
        compare("sft x2", sft, SFT_MIX, B, args.rounds, args.seconds)
        if not args.skip_plan:
            plan_scaling(B)
            loader_at_scale(tmp, B, T)


if __name__ == "__main__":
    main()
