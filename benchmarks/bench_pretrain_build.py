"""Pretrain cache build on realistic English text: throughput against SentencePiece's own limit, and peak RSS.

Text: `benchmarks/corpus.py` gathers --chars of English prose from this machine at run time (Python
standard library docstrings, /usr/share/doc, /usr/share/info; nothing committed, no network). Tokenizer:
16,000 pieces trained here with the project's trainer on the first quarter of that text (a tokenizer
trained on other text would cut it into more, shorter pieces), or --tokenizer.

(a) Throughput with --workers CPUs (2, the pretrain rule's `threads`) against the tokenizer's limit
(benchmarks/encode_limit.py: encode_batch, Pool(2) encode, Pool(2) count) on the same documents, cut
into the batches the build makes (encode.BATCH_DOCS / BATCH_CHARS). Contender: build_pretrain_cache(docs,
num_threads=2), unlimited budgets: uint16 shards written and hashed, meta.json; its workers' start-up is
inside the clock. The text is repeated --repeat times (3: ~16 M tokens) so that the build's fixed
costs (starting and stopping its workers, printed separately; the final fsync and meta.json) weigh
what they weigh in a real build, not 15 % of a 1-second run. Rates count document tokens (eot excluded).

(b) Memory. Each budget is built in a fresh subprocess from an endless stream (the corpus, cycled) with
--workers workers; it reports the peak RSS of the build process (VmHWM) and of its worker processes (the
sum of each one's VmHWM, read while they run: an upper bound of their peak together). Budget 0 is the
fixed cost of the imports and the tokenizer. Flat = the same peak for 10 M and 100 M tokens.

    python -m benchmarks.bench_pretrain_build [--chars 20000000] [--repeat 3] [--rounds 5] [--workers 2] \\
        [--budgets 10000000 100000000] [--tokenizer PATH]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.corpus import english_documents, gathered
from benchmarks.encode_limit import (
    build_arguments,
    compare,
    descendants,
    english_tokenizer,
    with_workers_cpu,
    worker_start_stop_seconds,
)
from benchmarks.timing import peak_rss_mb
from niels_gpt.pretrain import encode as batch_encode
from niels_gpt.pretrain import writer as pretrain_writer
from niels_gpt.tokenizer import SentencePieceTokenizer


def batches_of(docs: list[str]) -> list[list[str]]:
    return list(batch_encode.text_batches(docs, lambda: float("inf")))


def build(tok, docs, out: Path, workers: int) -> None:
    pretrain_writer.build_pretrain_cache(
        docs,
        str(out),
        tokenizer=tok,
        max_train_tokens=None,
        max_val_tokens=None,
        seed=0,
        shuffle_buffer=None,
        val_doc_prob=0.025,
        num_threads=workers,
    )


def throughput(tok, docs: list[str], n_tokens: int, rounds: int, workers: int, tmp: Path) -> None:
    build_once = with_workers_cpu(lambda: build(tok, docs, tmp / "build", workers))
    compare(tok, batches_of(docs), n_tokens, {"build": build_once}, rounds, workers)


class WorkerPeaks(threading.Thread):
    """Keeps each descendant process's last seen VmHWM (its peak so far) until stopped."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peaks: dict[int, float] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.5):
            for pid in descendants(os.getpid()):
                try:
                    self.peaks[pid] = max(self.peaks.get(pid, 0.0), peak_rss_mb(pid))
                except OSError:
                    pass  # it exited between listing and reading


def child(args) -> None:
    """One build from an endless stream; prints JSON with peak RSS of this process and of its workers."""
    tok = SentencePieceTokenizer(args.tokenizer)
    docs, _ = english_documents(args.child_chars)
    watcher = WorkerPeaks()
    watcher.start()
    start = time.perf_counter()
    meta = pretrain_writer.build_pretrain_cache(
        itertools.cycle(docs),
        args.out,
        tokenizer=tok,
        max_train_tokens=args.child,
        max_val_tokens=args.child // 40,
        seed=0,
        shuffle_buffer=None,
        val_doc_prob=0.025,
        num_threads=args.workers,
    )
    seconds = time.perf_counter() - start
    watcher.done.set()
    watcher.join()
    result = {
        "tokens": meta["train_tokens"] + meta["val_tokens"],
        "seconds": seconds,
        "rss_mb": peak_rss_mb(),
        "workers_rss_mb": sum(watcher.peaks.values()),
        "shards": len(meta["shards"]["train"]) + len(meta["shards"]["val"]),
    }
    print(json.dumps(result))


def memory(tok, budgets: list[int], workers: int, tmp: Path) -> None:
    for budget in [0, *budgets]:
        out = tmp / f"rss_{budget}"
        cmd = [sys.executable, "-m", "benchmarks.bench_pretrain_build", "--child", str(budget)]
        cmd += ["--tokenizer", str(tok.model_path), "--workers", str(workers), "--out", str(out)]
        res = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        print(
            f"budget {budget:>13,} train tokens: {res['tokens']:>13,} written in {res['shards']} shard(s), "
            f"{res['seconds']:6.1f} s ({res['tokens'] / max(res['seconds'], 1e-9) / 1e6:5.2f} M tokens/s); "
            f"peak RSS: build {res['rss_mb']:6.1f} MB + workers {res['workers_rss_mb']:6.1f} MB "
            f"= {res['rss_mb'] + res['workers_rss_mb']:6.1f} MB"
        )
        subprocess.run(["rm", "-rf", str(out)], check=True)


def main() -> None:
    ap = build_arguments(__doc__, repeated="text, for throughput,")
    ap.add_argument("--budgets", type=int, nargs="*", default=[10_000_000, 100_000_000], help="train budgets for RSS")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child-chars", type=int, default=5_000_000, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        return child(args)

    with tempfile.TemporaryDirectory(prefix="bench_pretrain_build_") as tmp:
        tmp = Path(tmp)
        docs = gathered(args.chars)
        tok = english_tokenizer(docs, tmp, args.tokenizer)
        n_tokens = sum(map(len, tok.encode_batch(docs)))
        chars = sum(map(len, docs))
        print(f"{tok!r}: {n_tokens:,} tokens ({chars / n_tokens:.2f} chars per token)")
        seconds = worker_start_stop_seconds(tok, args.workers)
        print(f"starting and stopping {args.workers} encoding workers: {seconds:.3f} s (every build pays it once)")
        throughput(tok, docs * args.repeat, n_tokens * args.repeat, args.rounds, args.workers, tmp)
        memory(tok, args.budgets, args.workers, tmp)


if __name__ == "__main__":
    main()
