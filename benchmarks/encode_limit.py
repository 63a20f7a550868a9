"""The tokenizer's limit, as the reference the build benchmarks compare against, and how they time contenders.

References, all on `workers` CPUs and the same batches of text as the contender:
  encode_batch     SentencePieceTokenizer.encode_batch(batch, num_threads=workers) per batch, nothing kept
  Pool(N) encode   a multiprocessing.Pool(N) whose workers load the model once; `pool.imap(encode, batches)`
                   returns every batch's `sp.encode(batch)` id lists to this process (the plain pattern)
  Pool(N) count    the same pool returning only how many ids each batch made: SentencePiece's bare rate
                   on N processes, nothing converted, written or sent back
The pool is started before the clock; a contender's own start-up is inside it (`worker_start_stop_seconds`
measures that fixed cost alone: ~0.1 s, which is why the benchmarks repeat the text to tens of millions
of tokens, nearer a real build's size, instead of timing a few seconds of work).

`compare` runs the references and the contenders in rounds, the order rotating; round 0 warms up
(page cache, the build's fork server) and is not counted. It reports tokens per wall second, and CPU
seconds per token of every process a contender uses (this one, the pool's workers, the build's workers
as the multiprocessing fork server reaps them), and CPUs busy (CPU seconds per wall second; 2 = both
cores kept busy). On a shared machine wall ratios swing with the neighbours' load, CPU ratios much
less; on a quiet one a contender that keeps as many CPUs busy as the reference has a wall ratio near
its CPU ratio. Ratios are taken per round against the references of the same
round, then the median. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from niels_gpt.tokenizer import SentencePieceTokenizer, train_sentencepiece

_pool_sp = None  # the model inside a reference pool's worker


def _pool_init(model_path: str) -> None:
    global _pool_sp
    import sentencepiece as spm

    _pool_sp = spm.SentencePieceProcessor(model_file=model_path)


def _pool_encode(texts: list[str]) -> list[list[int]]:
    return _pool_sp.encode(texts)


def _pool_count(texts: list[str]) -> int:
    return sum(len(ids) for ids in _pool_sp.encode(texts))


def english_tokenizer(docs: list[str], workdir: Path, path: str | None) -> SentencePieceTokenizer:
    """`path`, or 16,000 pieces trained with the project's trainer on the first quarter of `docs`
    (a tokenizer trained on other text cuts English into more, shorter pieces)."""
    if path:
        return SentencePieceTokenizer(path)
    start = time.perf_counter()
    tok = train_sentencepiece(docs[: len(docs) // 4], workdir / "english.model", vocab_size=16_000, num_threads=2)
    print(f"trained a 16,000-piece tokenizer on a quarter of the text in {time.perf_counter() - start:.0f} s")
    return tok


def build_arguments(doc: str, repeated: str) -> argparse.ArgumentParser:
    """The parser of a build benchmark: --chars of English, --repeat (what `repeated` names, this many
    times over), --rounds, --workers, --tokenizer; add the benchmark's own options to it."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chars", type=int, default=20_000_000, help="characters of English text")
    ap.add_argument("--repeat", type=int, default=3, help=f"the {repeated} this many times over")
    ap.add_argument("--rounds", type=int, default=5, help="counted rounds (after one warm-up round)")
    ap.add_argument("--workers", type=int, default=2, help="CPUs for every contender (the rule's threads)")
    ap.add_argument("--tokenizer", default=None, help="a niels_gpt SentencePiece model (default: train one)")
    return ap


def _stat_fields(pid: int | str) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _cpu_seconds(pids) -> float:
    """utime + stime of live processes."""
    return sum(int(f[11]) + int(f[12]) for f in map(_stat_fields, pids)) / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    parent = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent[int(stat.parent.name)] = int(_stat_fields(stat.parent.name)[1])
        except (OSError, IndexError):
            continue
    out, frontier = [], [pid]
    while frontier:
        frontier = [p for p, pp in parent.items() if pp in frontier]
        out += frontier
    return out


def forkserver_reaped_cpu() -> float:
    """CPU seconds of every process the multiprocessing fork server has started and reaped (its cutime +
    cstime): a build's worker processes, once the build has shut them down."""
    for pid in descendants(os.getpid()):
        try:
            if b"multiprocessing.forkserver" in Path(f"/proc/{pid}/cmdline").read_bytes():
                fields = _stat_fields(pid)
                return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            continue
    return 0.0


def with_workers_cpu(build: Callable[[], object]) -> Callable[[], float]:
    """A contender that runs `build` and returns the CPU seconds its worker processes used."""

    def run() -> float:
        before = forkserver_reaped_cpu()
        build()
        return forkserver_reaped_cpu() - before

    return run


def worker_start_stop_seconds(tok, workers: int, rounds: int = 5) -> float:
    """Median wall seconds to start `workers` encoding processes, encode one short text, and stop them:
    the fixed cost every build pays on top of its tokens (the reference pool is started before the clock)."""
    from niels_gpt.pretrain.encode import encode_documents
    from niels_gpt.tokenizer.workers import EncodeWorkers

    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        with EncodeWorkers(tok, workers) as pool:
            list(pool.map(encode_documents, [["a short text"]] * workers))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _timed(fn: Callable[[], float]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process + what fn reports for its helper processes)."""
    wall, cpu = time.perf_counter(), time.process_time()
    helpers = fn()
    return time.perf_counter() - wall, time.process_time() - cpu + helpers


def compare(
    tok, batches: list[list[str]], n_tokens: int, contenders: dict[str, Callable[[], float]], rounds: int, workers: int
) -> None:
    """Print rates and ratios of the references and `contenders` (callables returning their workers' CPU s)."""
    pool_encode, pool_count = f"Pool({workers}) encode", f"Pool({workers}) count"
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
            **contenders,
        }
        names = list(candidates)
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
        for r in range(rounds + 1):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                result = _timed(candidates[name])
                if r:
                    runs[name].append(result)
    for name, res in runs.items():
        wall = [w for w, _ in res]
        ratios = [
            f"{ref}: wall {statistics.median(rw / w for (rw, _), w in zip(runs[ref], wall)):4.2f} "
            f"CPU {statistics.median(rc / c for (_, rc), (_, c) in zip(runs[ref], res)):4.2f}"
            for ref in ("encode_batch", pool_encode, pool_count)
        ]
        busy = statistics.median(c / w for w, c in res)
        print(
            f"{name:16s} {n_tokens / statistics.median(wall) / 1e6:5.2f} M tokens/s, "
            f"{statistics.median(c for _, c in res) / n_tokens * 1e9:4.0f} CPU-ns/token, {busy:4.2f} CPUs busy "
            "| ratio to " + ", ".join(ratios)
        )
    print(f"(medians of {rounds} rounds after a warm-up round)")
