"""MixedLoader overhead per batch vs calling the datasets directly (B=32, T=1024 by default).

Two comparisons, each timed as microseconds per batch:
  single: `ds.get_batch(B, generator=g)` with one long-lived generator (the reference a training loop
          without MixedLoader would write) vs `next(MixedLoader({"a": ds}, p={"a": 1.0}, ...))`, which
          adds a fresh generator per step (derive_seed + manual_seed) and a draw_sources call;
  mixed:  a reference mixture written here (draw_sources, one get_batch per source in name order, rows
          scattered back, one long-lived generator: MixedLoader's random mode without its per-step
          seeding) vs a 3-source MixedLoader (the same draws plus the per-step generator).
Data: synthetic uint16 shards (benchmarks/synthetic.py: random ids < 16,004), page cache warmed first.
Reference and candidate are interleaved in one process over several rounds; medians and ratios.

    python -m benchmarks.bench_loader [--B 32] [--T 1024] [--rounds 7] [--seconds 0.5]
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

import torch

from benchmarks.synthetic import write_shards
from benchmarks.timing import batch_arguments, interleaved_rates, ratios, spread
from niels_gpt.cache.loader import MixedLoader
from niels_gpt.cache.pretrain_dataset import PretrainTokenStreamDataset
from niels_gpt.sampling import derive_seed, draw_sources

MIX = {"fineweb_edu": 0.6, "gutenberg": 0.1, "wikitext": 0.3}


def reference_mixed_batch(datasets: dict, p: dict, *, B: int, T: int, generator: torch.Generator):
    """The mixture contract with one long-lived generator and no per-step seeding."""
    names, idx = draw_sources(p, B, generator)
    x = torch.empty((B, T), dtype=torch.int64)
    y = torch.empty_like(x)
    for k, name in enumerate(names):
        rows = torch.nonzero(idx == k).squeeze(1)
        if len(rows):
            x[rows], y[rows] = datasets[name].get_batch(B=len(rows), generator=generator)
    return x, y


def compare(label: str, ref, new, rounds: int, seconds: float) -> None:
    rates = interleaved_rates({"reference": ref, "MixedLoader": new}, rounds, seconds)
    r, c = (1e6 / statistics.median(rates[name]) for name in ("reference", "MixedLoader"))
    print(
        f"{label:6s}: reference {r:8.1f} us/batch | MixedLoader {c:8.1f} us/batch | overhead {c - r:+7.1f} us | "
        f"ratio {spread(ratios(rates['reference'], rates['MixedLoader']))}"
    )


def main() -> None:
    ap = batch_arguments(__doc__)
    ap.add_argument("--tokens", type=int, default=5_000_000, help="tokens per source (one shard each)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    B, T = args.B, args.T

    with tempfile.TemporaryDirectory(prefix="bench_loader_") as tmp:
        for k, name in enumerate(MIX):
            write_shards(Path(tmp) / name, [args.tokens], seed=k)
        datasets = {name: PretrainTokenStreamDataset(Path(tmp) / name, T=T) for name in MIX}
        print(
            f"B={B} T={T}, {len(MIX)} sources of {args.tokens:,} tokens; torch threads 1; "
            f"{args.rounds} rounds x {args.seconds}s each"
        )

        ds = datasets["fineweb_edu"]
        g = torch.Generator().manual_seed(0)
        single = MixedLoader({"fineweb_edu": ds}, p={"fineweb_edu": 1.0}, B=B, seed=0)
        compare("single", lambda: ds.get_batch(B=B, generator=g), lambda: next(single), args.rounds, args.seconds)

        g_mix = torch.Generator().manual_seed(0)
        mixed = MixedLoader(datasets, p=MIX, B=B, seed=0)
        batch = mixed.batch_at(0)
        g0 = torch.Generator().manual_seed(derive_seed(0, 0, 0))
        want = reference_mixed_batch(datasets, MIX, B=B, T=T, generator=g0)
        assert torch.equal(batch.x, want[0]) and torch.equal(batch.y, want[1]), "batch 0 differs from the reference"
        compare(
            "mixed",
            lambda: reference_mixed_batch(datasets, MIX, B=B, T=T, generator=g_mix),
            lambda: next(mixed),
            args.rounds,
            args.seconds,
        )


if __name__ == "__main__":
    main()
