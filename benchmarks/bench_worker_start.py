"""Encoding workers' start from a script that imports torch at its top, as training scripts do.

Contenders, each timed from `EncodeWorkers(tokenizer, N)` to N results back and the workers stopped:
  script re-run   the workers run this module again first, as multiprocessing does by default (here
                  because the tokenizer's class is defined in the main module, so they must): each
                  worker imports torch before its first batch
  niels_gpt       the project's tokenizer: workers are started without the main module
Also the peak RSS of one worker of each. Rounds interleave the two; round 0 (which starts the fork
server) is not counted. Run: python -m benchmarks.bench_worker_start [--workers 2] [--rounds 7]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

import torch  # noqa: F401  (what the script re-run costs a worker: a training script's top-level import)

from benchmarks.timing import peak_rss_mb
from niels_gpt.pretrain.encode import encode_documents
from niels_gpt.tokenizer import SentencePieceTokenizer, train_sentencepiece
from niels_gpt.tokenizer.workers import EncodeWorkers

SYLLABLES = "ka to ri ne su mo la pe di ho an er in on st th ou ea".split()


class ScriptTokenizer(SentencePieceTokenizer):
    """The project's tokenizer under a class of the main module: its workers must run this script."""


def _text(n_docs: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    words = ["".join(rng.choices(SYLLABLES, k=rng.randint(1, 4))) for _ in range(3000)]
    return [" ".join(rng.choices(words, k=200)) for _ in range(n_docs)]


def start_and_stop(tokenizer, workers: int) -> tuple[float, float]:
    """(seconds from creating the workers to every worker's first result and their stop, one worker's
    peak RSS in MB)."""
    start = time.perf_counter()
    with EncodeWorkers(tokenizer, workers) as pool:
        list(pool.map(encode_documents, [["one document"]] * workers))
        rss = max(peak_rss_mb(p.pid) for p in pool._pool._processes.values())
    return time.perf_counter() - start, rss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=2, help="encoding workers (default: 2)")
    ap.add_argument("--rounds", type=int, default=7, help="counted rounds (default: 7)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "bench.model"
        train_sentencepiece(_text(2000), model, vocab_size=400, num_threads=2)
        contenders = {"script re-run": ScriptTokenizer(model), "niels_gpt": SentencePieceTokenizer(model)}
        seconds: dict[str, list[float]] = {name: [] for name in contenders}
        rss: dict[str, list[float]] = {name: [] for name in contenders}
        for r in range(args.rounds + 1):
            for name, tokenizer in contenders.items():
                took, mb = start_and_stop(tokenizer, args.workers)
                if r:
                    seconds[name].append(took)
                    rss[name].append(mb)
    for name in contenders:
        print(
            f"{name:14s} start+stop of {args.workers} workers: median {statistics.median(seconds[name]):.3f} s "
            f"(min {min(seconds[name]):.3f}, max {max(seconds[name]):.3f}); "
            f"peak RSS of a worker {statistics.median(rss[name]):.0f} MB"
        )
    per_round = [a / b for a, b in zip(seconds["script re-run"], seconds["niels_gpt"])]
    print(f"script re-run / niels_gpt: {statistics.median(per_round):.1f}x (median of per-round ratios)")


if __name__ == "__main__":
    main()
