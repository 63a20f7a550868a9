"""Pretrain cache build on realistic English text: throughput against SentencePiece's own limit, and peak RSS.

Text: `benchmarks/corpus.py` gathers --chars of English prose from this machine at run time (Python
standard library docstrings, /usr/share/doc, /usr/share/info; nothing committed, no network). Tokenizer:
16,000 pieces trained here with the project's trainer on the first quarter of that text (a tokenizer
trained on other text would cut it into more, shorter pieces), or --tokenizer.

(a) Throughput with --workers CPUs (2, the pretrain rule's `threads`), the documents cut into the
batches the build makes (encode.BATCH_DOCS / BATCH_CHARS):
  encode_batch   SentencePieceTokenizer.encode_batch(batch, num_threads=2) per batch, nothing kept
  Pool(2) encode a multiprocessing.Pool(2) whose workers load the model once; `pool.imap(encode, batches)`
                 returns every batch's `sp.encode(batch)` id lists to this process (the plain pattern)
  Pool(2) count  the same pool returning only how many ids each batch made: SentencePiece's bare rate
                 on 2 processes, nothing converted, written or sent back
                 (the pool is started before the clock, the build's workers inside it)
  build          build_pretrain_cache(docs, num_threads=2), unlimited budgets: uint16 shards written and
                 hashed, meta.json (its workers' start-up is inside the clock)
Rates are document tokens (eot excluded) per wall second, and CPU seconds per token of every process a
contender uses (this one, the pool's workers, the build's workers): on a shared machine wall ratios
swing with the neighbours' load, CPU ratios much less. Each round runs the four in turn (the order
rotates); round 0 warms up (page cache, the build's fork server) and is not counted; ratios are taken per
round against the references of the same round, then the median.

(b) Memory. Each budget is built in a fresh subprocess from an endless stream (the corpus, cycled) with
--workers workers; it reports the peak RSS of the build process (VmHWM) and of its worker processes (the
sum of each one's VmHWM, read while they run: an upper bound of their peak together). Budget 0 is the
fixed cost of the imports and the tokenizer. Flat = the same peak for 10 M and 100 M tokens.

    python -m benchmarks.bench_pretrain_build [--chars 20000000] [--rounds 5] [--workers 2] \\
        [--budgets 10000000 100000000] [--tokenizer PATH]
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.corpus import english_documents
from niels_gpt.pretrain import encode as batch_encode
from niels_gpt.pretrain import writer as pretrain_writer
from niels_gpt.tokenizer import SentencePieceTokenizer, train_sentencepiece

_pool_sp = None  # the model inside a Pool(2) reference worker


def _pool_init(model_path: str) -> None:
    global _pool_sp
    import sentencepiece as spm

    _pool_sp = spm.SentencePieceProcessor(model_file=model_path)


def _pool_encode(texts: list[str]) -> list[list[int]]:
    return _pool_sp.encode(texts)


def _pool_count(texts: list[str]) -> int:
    return sum(len(ids) for ids in _pool_sp.encode(texts))


def _cpu_seconds(pids) -> float:
    """utime + stime of live processes (/proc/PID/stat fields 14 and 15)."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def english_tokenizer(docs: list[str], workdir: Path, path: str | None) -> SentencePieceTokenizer:
    if path:
        return SentencePieceTokenizer(path)
    start = time.perf_counter()
    tok = train_sentencepiece(docs[: len(docs) // 4], workdir / "english.model", vocab_size=16_000, num_threads=2)
    print(f"trained a 16,000-piece tokenizer on a quarter of the text in {time.perf_counter() - start:.0f} s")
    return tok


def batches_of(docs: list[str]) -> list[list[str]]:
    return list(batch_encode.text_batches(docs, lambda: float("inf")))


def timed(fn) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of fn(); fn returns the CPU seconds its helper processes used."""
    wall, cpu = time.perf_counter(), time.process_time()
    helpers = fn()
    return time.perf_counter() - wall, time.process_time() - cpu + helpers


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
    batches = batches_of(docs)
    pool_encode, pool_count = f"Pool({workers}) encode", f"Pool({workers}) count"

    def built() -> float:
        before = forkserver_reaped_cpu()
        build(tok, docs, tmp / "build", workers)
        return forkserver_reaped_cpu() - before  # the build's workers, reaped when it shut them down

    with multiprocessing.Pool(workers, initializer=_pool_init, initargs=(tok.model_path,)) as pool:
        pids = [p.pid for p in multiprocessing.active_children()]

        def pooled(fn) -> float:
            before = _cpu_seconds(pids)
            for _ in pool.imap(fn, batches):
                pass
            return _cpu_seconds(pids) - before

        candidates = {
            "encode_batch": lambda: [tok.encode_batch(b, num_threads=workers) for b in batches] and 0.0,
            pool_encode: lambda: pooled(_pool_encode),
            pool_count: lambda: pooled(_pool_count),
            "build": built,
        }
        names = list(candidates)
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
        for r in range(rounds + 1):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                result = timed(candidates[name])
                if r:
                    runs[name].append(result)
    for name, res in runs.items():
        wall = [w for w, _ in res]
        ratios = {
            ref: (
                statistics.median(rw / w for (rw, _), w in zip(runs[ref], wall)),
                statistics.median(rc / c for (_, rc), (_, c) in zip(runs[ref], res)),
            )
            for ref in (pool_encode, pool_count)
        }
        print(
            f"{name:16s} {n_tokens / statistics.median(wall) / 1e6:5.2f} M tokens/s, "
            f"{statistics.median(c for _, c in res) / n_tokens * 1e9:4.0f} CPU-ns/token | ratio to "
            + ", ".join(f"{ref}: wall {w:4.2f} CPU {c:4.2f}" for ref, (w, c) in ratios.items())
        )
    print(
        f"(medians of {rounds} rounds; CPU counts every process of a contender: the CPU ratio holds on a busy machine)"
    )


def _vm_hwm_mb(pid: int | str) -> float:
    """Peak resident memory of one process (VmHWM; Linux carries ru_maxrss over fork+exec, VmHWM does not)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _descendants(pid: int) -> list[int]:
    parent = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(stat.parent.name)] = int(fields[1])
    out, frontier = [], [pid]
    while frontier:
        frontier = [p for p, pp in parent.items() if pp in frontier]
        out += frontier
    return out


def forkserver_reaped_cpu() -> float:
    """CPU seconds of every process the multiprocessing fork server has started and reaped (its
    cutime + cstime): the build's worker processes, once they have exited."""
    clock = os.sysconf("SC_CLK_TCK")
    for pid in _descendants(os.getpid()):
        try:
            if b"multiprocessing.forkserver" in Path(f"/proc/{pid}/cmdline").read_bytes():
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                return (int(fields[13]) + int(fields[14])) / clock
        except OSError:
            continue
    return 0.0


class WorkerPeaks(threading.Thread):
    """Keeps each descendant process's last seen VmHWM (its peak so far) until stopped."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peaks: dict[int, float] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.5):
            for pid in _descendants(os.getpid()):
                try:
                    self.peaks[pid] = max(self.peaks.get(pid, 0.0), _vm_hwm_mb(pid))
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
        "rss_mb": _vm_hwm_mb("self"),
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
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chars", type=int, default=20_000_000, help="characters of English text")
    ap.add_argument("--rounds", type=int, default=5, help="counted rounds (after one warm-up round)")
    ap.add_argument("--workers", type=int, default=2, help="CPUs for every contender (the rule's threads)")
    ap.add_argument("--budgets", type=int, nargs="*", default=[10_000_000, 100_000_000], help="train budgets for RSS")
    ap.add_argument("--tokenizer", default=None, help="a niels_gpt SentencePiece model (default: train one)")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child-chars", type=int, default=5_000_000, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        return child(args)

    with tempfile.TemporaryDirectory(prefix="bench_pretrain_build_") as tmp:
        tmp = Path(tmp)
        start = time.perf_counter()
        docs, kinds = english_documents(args.chars)
        print(
            f"English text gathered in {time.perf_counter() - start:.0f} s: {len(docs):,} documents, "
            + ", ".join(f"{kind} {chars / 1e6:.1f} M" for kind, chars in kinds.items())
            + " chars"
        )
        tok = english_tokenizer(docs, tmp, args.tokenizer)
        n_tokens = sum(map(len, tok.encode_batch(docs)))
        chars = sum(map(len, docs))
        print(f"{tok!r}: {n_tokens:,} tokens ({chars / n_tokens:.2f} chars per token)")
        throughput(tok, docs, n_tokens, args.rounds, args.workers, tmp)
        memory(tok, args.budgets, args.workers, tmp)


if __name__ == "__main__":
    main()
