"""Mixed byte batches per second: niels_gpt.batching vs a straightforward reference implementation.

Reference (written here, the obvious way): torch.multinomial for the B source choices, then
per row one torch.randint and `torch.tensor(list(chunk))`, stacked. Candidates: `get_batch` (validates
the sources and p on every call) and `StreamBatcher.get_batch` (validated once). Synthetic sources of
~10 MB in total; reference and candidates are interleaved in one process, several rounds; medians.

    python -m benchmarks.bench_byte_batch [--B 32] [--T 256] [--rounds 7] [--seconds 0.5]
"""

from __future__ import annotations

import statistics

import numpy as np
import torch

from benchmarks.timing import batch_arguments, interleaved_rates, rate, ratios
from niels_gpt.batching import StreamBatcher, default_p_train, get_batch

SOURCE_BYTES = {"wiki": 8_000_000, "roam": 2_000_000, "primer": 250_000}  # ~10 MB, shaped like p_train


def reference_get_batch(sources, *, p, B, T, device, generator=None):
    """The obvious implementation: per row one randint, then list(chunk) into a new tensor."""
    names = sorted(p)
    probs = torch.tensor([p[n] for n in names], dtype=torch.float64)
    choice = torch.multinomial(probs, B, replacement=True, generator=generator)
    xs, ys = [], []
    for k in choice.tolist():
        src = sources[names[k]]
        i = int(torch.randint(0, len(src) - (T + 1) + 1, (1,), generator=generator))
        chunk = src[i : i + T + 1]
        t = torch.tensor(list(chunk), dtype=torch.int64, device=device)
        xs.append(t[:-1])
        ys.append(t[1:])
    return torch.stack(xs), torch.stack(ys)


def main() -> None:
    args = batch_arguments(__doc__, T=256).parse_args()
    torch.set_num_threads(1)

    rng = np.random.default_rng(0)
    sources = {name: rng.integers(0, 256, n, dtype=np.uint8).tobytes() for name, n in SOURCE_BYTES.items()}
    p = default_p_train()
    B, T = args.B, args.T
    batcher = StreamBatcher(sources, p=p, T=T, device="cpu")
    g = torch.Generator().manual_seed(0)
    candidates = {
        "reference (per-row list)": lambda: reference_get_batch(sources, p=p, B=B, T=T, device="cpu", generator=g),
        "get_batch": lambda: get_batch(sources, p=p, B=B, T=T, device="cpu", generator=g),
        "StreamBatcher.get_batch": lambda: batcher.get_batch(B, g),
    }
    for fn in candidates.values():  # warm up
        rate(fn, 0.1)
    rates = interleaved_rates(candidates, args.rounds, args.seconds)

    total = sum(SOURCE_BYTES.values())
    print(f"byte batches, B={B} T={T}, {len(sources)} sources, {total:,} bytes, {args.rounds} rounds (medians)")
    ref = rates["reference (per-row list)"]
    for name, r in rates.items():
        print(
            f"  {name:<24} {statistics.median(r):>10,.0f} batches/s  "
            f"{1e6 / statistics.median(r):>8.1f} us/batch  x{statistics.median(ratios(r, ref)):.1f} vs reference"
        )


if __name__ == "__main__":
    main()
