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

Workers start on the first batch, forked from a fork server (a single-threaded process that imported
numpy and sentencepiece once; later sets of workers start in ~0.1 s instead of ~0.7 s), or spawned
where there is none (Windows). Forking this process itself is not safe: by then it runs threads
(torch's intra-op pool, pyarrow's, `datasets`' prefetch, tqdm's monitor: 10 in a streamed build) whose
locks a child would inherit held. Workers ignore Ctrl-C (the parent shuts them down); an exception in
`fn` is raised again by `map`.

The main module stays out of the workers. By default multiprocessing has each worker run it again (a
script as `__mp_main__`) so that its objects can be unpickled, so a script calling the builders at its
top level without `if __name__ == "__main__":` would build again in every worker, and die. What is sent
here comes from niels_gpt, so each worker is started while `sys.modules["__main__"]` is a blank module
(the few ms of `Process.start`): no main module is prepared, the script runs once, guard or none, and a
worker does not import what it imports (torch: 1.5 s and ~190 MB per worker,
benchmarks/bench_worker_start.py). Only when the tokenizer or `fn` comes from the main module
(`refers_to_main`) do the workers run it, and that script needs the guard.
"""

from __future__ import annotations

import collections
import concurrent.futures
import io
import multiprocessing
import os
import pickle
import signal
import sys
import types
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


class _MainFinder(pickle.Pickler):
    """Pickles into a throwaway buffer, noting whether a class or function of `__main__` is referred to."""

    def __init__(self):
        super().__init__(io.BytesIO(), protocol=pickle.HIGHEST_PROTOCOL)
        self.found = False

    def reducer_override(self, obj):
        if isinstance(obj, (type, types.FunctionType)) and getattr(obj, "__module__", None) == "__main__":
            self.found = True
            return str, ()  # a stand-in: the scan needs no lookup of the name
        return NotImplemented  # pickle it as usual


def refers_to_main(*objects) -> bool:
    """Whether pickling `objects` refers to a class or function of the main module (a worker could not
    unpickle them without running that module)."""
    finder = _MainFinder()
    finder.dump(objects)
    return finder.found


_BASE_CONTEXT = multiprocessing.get_context(START_METHOD)
_BLANK_MAIN = types.ModuleType("__main__")  # no __file__, no __spec__: multiprocessing prepares no main


class _ProcessWithoutMain(_BASE_CONTEXT.Process):
    """A worker process whose preparation data names no main module, so the child does not run it."""

    def start(self) -> None:
        main = sys.modules["__main__"]
        sys.modules["__main__"] = _BLANK_MAIN
        try:
            super().start()
        finally:
            sys.modules["__main__"] = main


class _ContextWithoutMain(type(_BASE_CONTEXT)):
    Process = _ProcessWithoutMain


def _context(with_main: bool):
    ctx = _BASE_CONTEXT if with_main else _ContextWithoutMain()
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
                mp_context=_context(with_main=refers_to_main(self.tokenizer, fn)),
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
