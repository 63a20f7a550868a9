"""Tokenization in worker processes: batches of text in, compact token arrays out, in input order.

Why processes: sentencepiece's own batch encoding runs its C++ in threads, but building the Python
lists of ids it returns, and turning those into uint16 arrays, holds the GIL of the one calling
process, so on real text a threaded build reached ~0.65 of what separate processes reach. Here every
worker is a process holding its own copy of the tokenizer (the model bytes travel with it, so every
worker encodes with exactly the parent's model), runs a module-level function `fn(tokenizer, batch)`
that encodes AND packs its result into numpy arrays, and returns those (pickled as raw bytes); the
parent only reads input, sends batches and writes what comes back.

Order and determinism: `EncodeWorkers.map` yields results in submission order whatever the number of
workers and whichever finishes first, and the functions encode every text independently, so output
bytes never depend on the worker count. One worker runs `fn` in the calling process (on one core a
second process would only add start-up and copying). Input is read at most AHEAD_PER_WORKER batches per
worker ahead of the result being consumed: memory holds a few batches, and a writer whose budget is
full stops the reading soon after.

Workers are started on the first batch from a fork server (a clean single-threaded process that has
imported numpy and sentencepiece once, so a fork is safe whatever threads this process runs, and the
second and later sets of workers in a process start in ~0.1 s instead of ~0.7 s), or spawned where
fork servers do not exist (Windows). They ignore Ctrl-C: the parent handles it and shuts them down.
An exception in `fn` is raised again in the parent by `map`. As with any multiprocessing outside the
fork method, each worker imports the main module again: a script that builds caches through the API
must keep its top-level code under `if __name__ == "__main__":` (the CLIs and Snakemake rules do).
"""

from __future__ import annotations

import collections
import concurrent.futures
import multiprocessing
import os
import signal
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

Result = TypeVar("Result")

# Batches in flight per worker (~4 MiB of text each at encode.BATCH_CHARS). Results are consumed in input
# order, so a batch that is slow to encode holds back new submissions; a queue this deep keeps the other
# workers busy meanwhile, at a few MB of memory.
AHEAD_PER_WORKER = 4
START_METHOD = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
PRELOAD = ["numpy", "sentencepiece", "niels_gpt.tokenizer.model"]  # what every worker imports anyway

_worker_tokenizer = None  # set in each worker process by _init_worker


def available_cpus() -> int:
    """CPUs this process may run on (the scheduler's affinity mask: a SLURM job's allocation), at least 1."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def resolve_workers(num_workers: int) -> int:
    """`num_workers`, with -1 meaning every available CPU; anything else below 1 is refused."""
    if num_workers == -1:
        return available_cpus()
    if num_workers < 1:
        raise ValueError(f"number of encoding workers must be >= 1 or -1 (every CPU), got {num_workers}")
    return num_workers


def _init_worker(tokenizer) -> None:
    global _worker_tokenizer
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _worker_tokenizer = tokenizer


def _call(fn: Callable, batch: Any):
    return fn(_worker_tokenizer, batch)


def _context():
    ctx = multiprocessing.get_context(START_METHOD)
    if START_METHOD == "forkserver":
        ctx.set_forkserver_preload(PRELOAD)
    return ctx


class EncodeWorkers:
    """`num_workers` tokenizer processes (-1 = every available CPU); use as a context manager."""

    def __init__(self, tokenizer, num_workers: int):
        self.tokenizer = tokenizer
        self.num_workers = resolve_workers(num_workers)
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None

    def __enter__(self) -> EncodeWorkers:
        return self

    def __exit__(self, *exc) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def _submit(self, fn: Callable, batch: Any) -> concurrent.futures.Future:
        if self._pool is None:
            self._pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=self.num_workers,
                mp_context=_context(),
                initializer=_init_worker,
                initargs=(self.tokenizer,),
            )
        return self._pool.submit(_call, fn, batch)

    def map(self, fn: Callable[[Any, Any], Result], batches: Iterable) -> Iterator[Result]:
        """fn(tokenizer, batch) for every batch, in input order; `fn` must be a module-level function."""
        if self.num_workers == 1:
            for batch in batches:
                yield fn(self.tokenizer, batch)
            return
        batches = iter(batches)
        pending = collections.deque()
        for batch in batches:
            pending.append(self._submit(fn, batch))
            if len(pending) >= AHEAD_PER_WORKER * self.num_workers:
                break
        while pending:
            result = pending.popleft().result()
            batch = next(batches, None)
            if batch is not None:
                pending.append(self._submit(fn, batch))
            yield result
