"""Packed SFT rows against padded ones: how much of a batch is data, how much is trained, what it costs.

Two synthetic caches in the SFT format (benchmarks/synthetic.py's writer: role token + content + eot per
message, random ordinary ids), with example lengths shaped like the real sources at T=1024:
  oasst1-shaped  threads of 1-8 user/assistant pairs (geometric), log-normal contents; mean ~490
                 tokens, a long tail past 4k; read with oasst1's truncation (head);
  dolly-shaped   one instruction (a long context in 30 %) and one reply; mean ~200 tokens; read
                 with dolly's truncation (prompt).
Per cache, the same dataset opened padded (SFTExampleDataset, the reference) and packed
(`packing=True`), in the same process:
  - init: padded vs packed (the packing itself, best-fit decreasing, also timed alone), scaled to
    seconds per 100k examples; and a plain best-fit decreasing written the textbook way (a sorted
    list of free rooms, bisect per example) as the reference for the packing alone, which must
    produce as many rows;
  - data per batch over many batches (medians): the share of x slots that are not padding, and the
    loss-active targets per batch (y_masked != -100), packed / padded;
  - get_batch time, padded and packed interleaved over several rounds, medians and the ratio.
Targets: non-padding >= 0.95 packed; loss-active targets >= 1.8x (oasst1-shaped), >= 4x
(dolly-shaped); packed get_batch <= 1.5x padded; packing <= 1 s per 100k examples.

    python -m benchmarks.bench_sft_packing [--B 32] [--T 1024] [--examples 100000] [--rounds 7]
"""

from __future__ import annotations

import bisect
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks.synthetic import SP, chat_roles, write_messages
from benchmarks.timing import batch_arguments, interleaved_rates, ratios
from niels_gpt.cache.sft_dataset import SFTExampleDataset
from niels_gpt.sft.packing import pack_examples, row_pieces

SHAPES = {"oasst1": "head", "dolly15k": "prompt"}  # shape -> the truncation its source uses
MEASURED_BATCHES = 200  # batches whose contents are counted (not timed)


def write_shaped_cache(out: Path, shape: str, n_examples: int, seed: int = 0) -> int:
    """An SFT cache whose example lengths are shaped like `shape`'s (module docstring)."""
    rng = np.random.default_rng(seed)
    if shape == "oasst1":
        pairs = np.minimum(rng.geometric(0.55, n_examples), 8)
        n_msgs, roles = chat_roles(pairs, np.zeros(n_examples, dtype=np.int64))
        median = np.where(roles == SP["asst"], 115.0, 45.0)
        content = rng.lognormal(np.log(median), 1.0)
    else:
        n_msgs, roles = chat_roles(np.ones(n_examples, dtype=np.int64), np.zeros(n_examples, dtype=np.int64))
        context = np.where(rng.random(len(roles)) < 0.3, rng.lognormal(np.log(180.0), 0.9, len(roles)), 0)
        content = np.where(roles == SP["asst"], rng.lognormal(np.log(60.0), 1.0, len(roles)), 18 + context)
    return write_messages(out, n_msgs, roles, np.minimum(content, 8000).astype(np.int64), rng)


def textbook_bfd(lengths: np.ndarray, width: int) -> int:
    """Best-fit decreasing with a sorted list of (room, row) and bisect; returns the number of rows."""
    rooms: list[tuple[int, int]] = []
    rows = 0
    for s in sorted(lengths.tolist(), reverse=True):
        i = bisect.bisect_left(rooms, (s, -1))
        if i == len(rooms):
            room, row = width, rows
            rows += 1
        else:
            room, row = rooms.pop(i)
        bisect.insort(rooms, (room - s, row))
    return rows


def open_both(folder: Path, T: int, truncation: str, n: int) -> tuple[SFTExampleDataset, SFTExampleDataset]:
    """The padded and the packed dataset, each init timed; the packing alone timed, and its reference."""
    files = (folder / "train_tokens.bin", folder / "train_idx.npy")

    def timed_init(packing: bool) -> tuple[SFTExampleDataset, float]:
        start = time.perf_counter()
        ds = SFTExampleDataset(*files, T=T, eot_id=SP["eot"], truncation=truncation, packing=packing)
        return ds, time.perf_counter() - start

    (padded, t_padded), (packed, t_packed) = timed_init(False), timed_init(True)
    lengths = packed.segments.len1 + packed.segments.len2
    start = time.perf_counter()
    row_pieces(pack_examples(lengths, T + 1, seed=0), packed.segments, T + 1)
    alone = time.perf_counter() - start
    start = time.perf_counter()
    reference_rows = textbook_bfd(lengths, T + 1)
    reference = time.perf_counter() - start
    assert reference_rows == len(packed), f"textbook BFD: {reference_rows:,} rows, pack_examples {len(packed):,}"
    per = 100_000 / n
    print(
        f"  init per 100k examples: padded {t_padded * per:.2f} s, packed {t_packed * per:.2f} s; the packing "
        f"alone {alone * per:.3f} s (textbook bisect BFD: {reference * per:.2f} s, {reference / alone:.1f}x; same "
        f"{len(packed):,} rows for {len(lengths):,} examples)"
    )
    return padded, packed


def contents(ds: SFTExampleDataset, B: int, seed: int) -> tuple[float, float]:
    """Medians over MEASURED_BATCHES batches (the rows get_batch would draw: one randint, then rows()):
    share of x slots holding a token, loss-active targets."""
    g = torch.Generator().manual_seed(seed)
    fills, active = [], []
    for _ in range(MEASURED_BATCHES):
        ids = torch.randint(len(ds), (B,), generator=g).numpy()
        arrays = ds.rows(ids)
        if ds.packing:
            fills.append(float((arrays[3] > 0).mean()))
        else:  # padded: the slots up to the example's kept length
            kept = ds.segments.len1[ids] + ds.segments.len2[ids]
            fills.append(float(np.minimum(kept, ds.T).mean() / ds.T))
        active.append(int((arrays[2] != ds.ignore_index).sum()))
    return statistics.median(fills), statistics.median(active)


def timed(padded: SFTExampleDataset, packed: SFTExampleDataset, B: int, rounds: int, seconds: float) -> float:
    """get_batch us per call, interleaved rounds; prints the medians, returns the median ratio."""
    gens = (torch.Generator().manual_seed(1), torch.Generator().manual_seed(2))
    contenders = {
        name: (lambda ds=ds, g=g: ds.get_batch(B=B, generator=g))
        for name, ds, g in zip(("padded", "packed"), (padded, packed), gens)
    }
    rates = interleaved_rates(contenders, rounds, seconds)
    times = [[1e6 / r for r in rates[name]] for name in ("padded", "packed")]
    per_round = ratios(rates["padded"], rates["packed"])
    print(
        f"  get_batch B={B}: padded {statistics.median(times[0]):.0f} us, packed {statistics.median(times[1]):.0f} "
        f"us; ratio {statistics.median(per_round):.2f}x (rounds {min(per_round):.2f}-{max(per_round):.2f}x)"
    )
    return statistics.median(per_round)


def main() -> None:
    ap = batch_arguments(__doc__)
    ap.add_argument("--examples", type=int, default=100_000)
    args = ap.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        for shape, truncation in SHAPES.items():
            folder = Path(tmp) / shape
            n_tok = write_shaped_cache(folder, shape, args.examples)
            starts = np.load(folder / "train_idx.npy")
            lengths = np.diff(np.append(starts, n_tok))
            print(
                f"{shape}-shaped: {args.examples:,} examples, mean {lengths.mean():.0f} tokens, p99 "
                f"{np.percentile(lengths, 99):,.0f}, max {lengths.max():,}; {(lengths > args.T + 1).mean():.1%} "
                f"longer than T+1 (truncation {truncation})"
            )
            padded, packed = open_both(folder, args.T, truncation, args.examples)
            (fill_a, act_a), (fill_b, act_b) = contents(padded, args.B, 3), contents(packed, args.B, 3)
            print(
                f"  per batch (median of {MEASURED_BATCHES}): non-padding {fill_a:.3f} padded, {fill_b:.3f} packed; "
                f"loss-active targets {act_a:,.0f} padded, {act_b:,.0f} packed: {act_b / act_a:.2f}x"
            )
            timed(padded, packed, args.B, args.rounds, args.seconds)


if __name__ == "__main__":
    main()
