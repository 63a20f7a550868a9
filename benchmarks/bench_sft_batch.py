"""SFT batches per second: SFTExampleDataset.get_batch vs a naive per-example Python reference.

Cache: 100k synthetic chat examples written directly in the SFT cache format (benchmarks/synthetic.py:
uint16 tokens, int64 offsets, meta.json with the special ids): 1-4 user/assistant turns, sometimes a system message,
content lengths log-normal (median ~45 tokens), so examples run from ~10 to a few thousand tokens
and some exceed T+1. Reference (written here): per row slice the example from the memmap, make a
python list, cut to T+1, compute the mask with a Python loop over tokens, pad, torch.tensor; rows
are stacked. Candidate: one torch.randint, one gather for all B rows, a mask precomputed at init.
Both sample the same rows from the same generator state; the first batch is checked equal.
Reference and candidate are interleaved in one process, several rounds; medians and ratios. The same
cache read with `prompt` truncation (two segments per cut example: the final reply whole) is timed in
the same rounds: its init and its get_batch against head's.

    python -m benchmarks.bench_sft_batch [--B 32] [--T 1024] [--examples 100000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks.synthetic import SP, write_sft_cache
from benchmarks.timing import batch_arguments
from niels_gpt.cache.sft_dataset import SFTExampleDataset


def reference_get_batch(ds: SFTExampleDataset, starts, ends, *, B: int, generator):
    """Naive: per row slice, list, Python mask loop, pad, torch.tensor."""
    T, eot = ds.T, ds.eot_id
    roles = {SP["sys"], SP["usr"], SP["asst"]}
    ids = torch.randint(len(ds), (B,), generator=generator).tolist()
    xs, ys, yms = [], [], []
    for i in ids:
        ex = int(ds.kept[i])
        seq = ds.tokens[starts[ex] : min(ends[ex], starts[ex] + T + 1)].tolist()
        mask, in_asst = [], False
        for t in seq:
            if t in roles:
                in_asst = t == SP["asst"]
                mask.append(False)
            else:
                mask.append(in_asst)
        pad = T + 1 - len(seq)
        seq += [eot] * pad
        mask += [False] * pad
        y = seq[1:]
        xs.append(torch.tensor(seq[:-1]))
        ys.append(torch.tensor(y))
        yms.append(torch.tensor([t if m else -100 for t, m in zip(y, mask[1:])]))
    return torch.stack(xs), torch.stack(ys), torch.stack(yms)


def per_batch_seconds(fn, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n


def main() -> None:
    ap = batch_arguments(__doc__, seconds=None)
    ap.add_argument("--examples", type=int, default=100_000)
    ap.add_argument("--write-only", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.write_only:  # child process: keeps the generator's memory out of the reader's peak RSS
        print(write_sft_cache(Path(args.write_only), args.examples))
        return

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        t0 = time.perf_counter()
        cmd = [
            sys.executable,
            "-m",
            "benchmarks.bench_sft_batch",
            "--examples",
            str(args.examples),
            "--write-only",
            tmp,
        ]
        n_tok = int(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        print(
            f"cache: {args.examples:,} examples, {n_tok:,} tokens ({2 * n_tok / 1e6:.0f} MB), "
            f"written in {time.perf_counter() - t0:.1f}s (child process)"
        )
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        t0 = time.perf_counter()
        ds = SFTExampleDataset(
            out / "train_tokens.bin", out / "train_idx.npy", T=args.T, device="cpu", eot_id=SP["eot"]
        )
        print(
            f"SFTExampleDataset init (mask + windows over every token): {time.perf_counter() - t0:.2f}s, "
            f"{len(ds):,} kept, {ds.num_excluded:,} excluded; "
            f"peak RSS {rss_before:.0f} MB before init (torch imported), "
            f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB after (file pages touched included)"
        )
        t0 = time.perf_counter()
        prompt = SFTExampleDataset(
            out / "train_tokens.bin", out / "train_idx.npy", T=args.T, eot_id=SP["eot"], truncation="prompt"
        )
        print(
            f"same cache, truncation=prompt: init {time.perf_counter() - t0:.2f}s, {len(prompt):,} kept, "
            f"cut {prompt.cut}, {int((prompt.segments.len2 > 0).sum()):,} rows of two segments"
        )
        starts = np.load(out / "train_idx.npy")
        ends = np.append(starts[1:], n_tok)

        ref = reference_get_batch(ds, starts, ends, B=args.B, generator=torch.Generator().manual_seed(1))
        cand = ds.get_batch(B=args.B, generator=torch.Generator().manual_seed(1))
        assert all(torch.equal(a, b) for a, b in zip(ref, cand)), "candidate and reference disagree"
        print("check: candidate == reference on the same rows")

        g_ref, g_cand = torch.Generator().manual_seed(2), torch.Generator().manual_seed(3)
        n_ref, n_cand = 10, 200
        ref_t, cand_t, prompt_t = [], [], []
        g_prompt = torch.Generator().manual_seed(4)
        for r in range(args.rounds):
            ref_t.append(
                per_batch_seconds(lambda: reference_get_batch(ds, starts, ends, B=args.B, generator=g_ref), n_ref)
            )
            cand_t.append(per_batch_seconds(lambda: ds.get_batch(B=args.B, generator=g_cand), n_cand))
            prompt_t.append(per_batch_seconds(lambda: prompt.get_batch(B=args.B, generator=g_prompt), n_cand))
            print(
                f"round {r + 1}: reference {ref_t[-1] * 1e3:7.2f} ms  candidate {cand_t[-1] * 1e3:6.3f} ms  "
                f"ratio {ref_t[-1] / cand_t[-1]:5.1f}x  prompt {prompt_t[-1] * 1e3:6.3f} ms"
            )
        ref_m, cand_m = statistics.median(ref_t), statistics.median(cand_t)
        ratios = [a / b for a, b in zip(ref_t, cand_t)]
        print(
            f"B={args.B} T={args.T}: reference median {ref_m * 1e3:.2f} ms/batch, candidate median "
            f"{cand_m * 1e3:.3f} ms/batch ({1 / cand_m:,.0f} batches/s); ratio of medians {ref_m / cand_m:.1f}x, "
            f"median of per-round ratios {statistics.median(ratios):.1f}x"
        )
        prompt_m = statistics.median(prompt_t)
        print(
            f"truncation=prompt: median {prompt_m * 1e3:.3f} ms/batch, {prompt_m / cand_m:.2f}x head's; "
            f"median of per-round ratios {statistics.median(p / c for p, c in zip(prompt_t, cand_t)):.2f}x"
        )


if __name__ == "__main__":
    main()
