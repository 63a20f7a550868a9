"""Pretrain batches per second: PretrainTokenStreamDataset.get_batch vs a nanoGPT-style reference.

Reference (written here, as nanoGPT's train.py does it): every call re-opens the shard with np.memmap,
picks a shard uniformly, draws B starts with torch.randint, and builds x and y from a Python list of
`torch.from_numpy(slice.astype(np.int64))` rows + torch.stack. Candidate: the dataset's persistent
memmaps, vectorized gather into a preallocated buffer, one conversion. Synthetic uint16 shards
(benchmarks/synthetic.py: random ids < 16,004); the page cache is warmed first; reference and candidate
are interleaved in one process over several rounds; medians and their ratio are printed.

    python -m benchmarks.bench_pretrain_batch [--T 1024] [--B 32 64] [--shards 3] [--shard-tokens 20000000]
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

import numpy as np
import torch

from benchmarks.synthetic import write_shards
from benchmarks.timing import batch_arguments, interleaved_rates, ratios, spread
from niels_gpt.cache.pretrain_dataset import PretrainTokenStreamDataset


def reference_get_batch(paths: list[Path], *, B: int, T: int, generator: torch.Generator):
    """nanoGPT's get_batch, with a uniformly chosen shard."""
    path = paths[int(torch.randint(len(paths), (1,), generator=generator))]
    data = np.memmap(path, dtype=np.uint16, mode="r")
    ix = torch.randint(len(data) - T, (B,), generator=generator)
    x = torch.stack([torch.from_numpy(data[i : i + T].astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy(data[i + 1 : i + 1 + T].astype(np.int64)) for i in ix])
    return x, y


def main() -> None:
    ap = batch_arguments(__doc__, B=[32, 64])
    ap.add_argument("--shards", type=int, default=3)
    ap.add_argument("--shard-tokens", type=int, default=20_000_000, help="tokens per shard (uint16)")
    args = ap.parse_args()
    torch.set_num_threads(1)

    with tempfile.TemporaryDirectory(prefix="bench_pretrain_batch_") as tmp:
        sizes = [args.shard_tokens - i * 1000 for i in range(args.shards)]  # shards of unequal length
        paths = write_shards(Path(tmp) / "train", sizes)
        ds = PretrainTokenStreamDataset(Path(tmp) / "train", T=args.T, device="cpu")
        print(f"{ds!r}; torch threads 1; {args.rounds} rounds x {args.seconds}s each")
        for B in args.B:
            g_ref, g_new = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)

            def ref(B=B, g=g_ref):
                return reference_get_batch(paths, B=B, T=args.T, generator=g)

            def new(B=B, g=g_new):
                return ds.get_batch(B=B, generator=g)

            x, y = new()
            assert torch.equal(y[:, :-1], x[:, 1:]) and x.dtype == torch.int64
            rates = interleaved_rates({"reference": ref, "get_batch": new}, args.rounds, args.seconds)
            r, c = statistics.median(rates["reference"]), statistics.median(rates["get_batch"])
            print(
                f"B={B:3d} T={args.T}: reference {r:9,.0f} batches/s | get_batch {c:9,.0f} batches/s "
                f"({1e6 / c:6.1f} us/batch) | ratio {spread(ratios(rates['get_batch'], rates['reference']), '.1f')}"
            )


if __name__ == "__main__":
    main()
