"""Keep the next batches ready while a training step runs: a background thread over any batch iterator.

    for batch in prefetch(loader, "cuda"):  # MixedLoader, a DataLoader, a generator of batches ...
        ...

A daemon thread takes batches from the iterator, moves every tensor in them to `device`
(niels_gpt.to_device: pinned memory and a non-blocking copy on CUDA; a batch is a tensor, a tuple or
list, a dict or a dataclass such as MixedLoader's `Batch`, nested; tensors already there stay) and puts
them in a queue of at most `depth` batches; one more may be in the making. The loop's `next()` only
takes the next batch off the queue, in the iterator's order.
  - CUDA: the thread runs on its own CUDA stream, so its copies overlap the step's kernels; the batch
    carries an event recorded after its copies, the consumer's stream waits for it before the batch is
    handed out, and its tensors are marked as used by that stream (memory is not reused early).
  - Errors: an exception raised by the iterator (or by the move) is raised by `next()` after the batches
    that came before it; then the prefetcher is finished.
  - State: when the iterator has `state_dict()` (MixedLoader, torchdata's StatefulDataLoader), the thread
    takes it right after each batch; `Prefetcher.state_dict()` is the one of the last batch handed out, so
    a checkpoint resumes after the batches the loop consumed, not after those waiting in the queue.
  - Stopping: at the end of the iterator; `close()` (also on leaving a `with` block, and when the
    Prefetcher is garbage collected) sets a stop event that the thread checks between batches and while
    it waits on a full queue (it cannot interrupt a `next()` of the iterator in progress). The thread is a
    daemon: it never keeps the interpreter alive.
Which to use: a reader's `get_batch` or MixedLoader has no workers: wrap it here. A torch DataLoader with
`num_workers > 0` already makes batches ahead in worker processes; give it `pin_memory=True` and wrap it
here only for the non-blocking copy to the GPU ahead of the step (`prefetch(loader, "cuda", depth=1)`).
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import weakref
from collections.abc import Iterable, Mapping
from contextlib import nullcontext

import torch

from niels_gpt.to_device import to_device
from niels_gpt.training.loader import check_int

POLL_S = 0.05  # how often a thread waiting on a full queue checks whether it was closed
JOIN_S = 10.0  # how long close() waits for the thread (a next() of the iterator in progress) before giving up


def move(batch, device: torch.device):
    """`batch` with every tensor in it on `device` (to_device), its structure kept."""
    if isinstance(batch, torch.Tensor):
        return batch if batch.device == device else to_device([batch], device)[0]
    if isinstance(batch, Mapping):
        moved = {key: move(value, device) for key, value in batch.items()}
        try:
            return type(batch)(moved)
        except TypeError:  # a mapping type that cannot be built from a dict: a plain dict
            return moved
    if isinstance(batch, (tuple, list)):
        moved = [move(value, device) for value in batch]
        return type(batch)(*moved) if hasattr(batch, "_fields") else type(batch)(moved)
    if dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        fields = {f.name: move(getattr(batch, f.name), device) for f in dataclasses.fields(batch) if f.init}
        return dataclasses.replace(batch, **fields)
    return batch


def tensors_in(batch) -> list[torch.Tensor]:
    """Every tensor of `batch` (the structures `move` walks)."""
    if isinstance(batch, torch.Tensor):
        return [batch]
    if isinstance(batch, Mapping):
        values = list(batch.values())
    elif isinstance(batch, (tuple, list)):
        values = list(batch)
    elif dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        values = [getattr(batch, f.name) for f in dataclasses.fields(batch)]
    else:
        return []
    return [t for value in values for t in tensors_in(value)]


class _Failed:
    """What the thread puts in the queue when the iterator raised: the exception."""

    def __init__(self, error: BaseException):
        self.error = error


_END = object()  # what the thread puts in the queue after the iterator's last batch


def _put(out: queue.Queue, item, stop: threading.Event) -> bool:
    """Put `item`, waiting while the queue is full; False when stopped first."""
    while not stop.is_set():
        try:
            out.put(item, timeout=POLL_S)
            return True
        except queue.Full:
            continue
    return False


def _produce(iterator, device, stream, with_state: bool, out: queue.Queue, stop: threading.Event) -> None:
    """The thread: (batch, state, event) per batch, then _END or _Failed. It holds no reference to the
    Prefetcher, so dropping the Prefetcher can collect it and stop this thread."""
    try:
        with torch.cuda.stream(stream) if stream is not None else nullcontext():
            while not stop.is_set():
                try:
                    batch = next(iterator)
                except StopIteration:
                    _put(out, _END, stop)
                    return
                if device is not None:
                    batch = move(batch, device)
                state = iterator.state_dict() if with_state else None
                event = None
                if stream is not None:
                    event = torch.cuda.Event()
                    event.record(stream)
                if not _put(out, (batch, state, event), stop):
                    return
    except BaseException as error:  # handed to the consumer, raised there
        _put(out, _Failed(error), stop)


class Prefetcher:
    """An iterator over `batches` made ahead by a background thread (module docstring)."""

    def __init__(self, batches: Iterable, device: str | torch.device | None = None, *, depth: int = 2):
        self.depth = check_int("depth", depth, 1)
        self.device = None if device is None else torch.device(device)
        iterator = iter(batches)
        with_state = callable(getattr(iterator, "state_dict", None))
        on_cuda = self.device is not None and self.device.type == "cuda" and torch.cuda.is_available()
        self._stream = torch.cuda.Stream(self.device) if on_cuda else None
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._state = iterator.state_dict() if with_state else None
        self._finished = False
        self._thread = threading.Thread(
            target=_produce,
            args=(iterator, self.device, self._stream, with_state, self._queue, self._stop),
            name="niels_gpt-prefetch",
            daemon=True,
        )
        self._thread.start()
        weakref.finalize(self, self._stop.set)

    def __iter__(self) -> Prefetcher:
        return self

    def __next__(self):
        if self._finished:
            raise StopIteration
        item = self._queue.get()
        if item is _END or isinstance(item, _Failed):
            self._finished = True
            self._stop.set()
            if item is _END:
                raise StopIteration
            raise item.error
        batch, state, event = item
        if event is not None:
            consumer = torch.cuda.current_stream(self.device)
            consumer.wait_event(event)
            for tensor in tensors_in(batch):
                if tensor.is_cuda:
                    tensor.record_stream(consumer)
        self._state = state
        return batch

    def state_dict(self):
        """The iterator's state right after the last batch handed out (before the first: at the start)."""
        if self._state is None:
            raise TypeError("the prefetched iterator has no state_dict()")
        return self._state

    def close(self) -> None:
        """Stop the thread and drop the batches it made ahead; next() then raises StopIteration."""
        self._finished = True
        self._stop.set()
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        if self._thread is not threading.current_thread():
            self._thread.join(JOIN_S)

    def __enter__(self) -> Prefetcher:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "finished" if self._finished else f"{self._queue.qsize()} of {self.depth} ready"
        return f"Prefetcher(device={self.device}, depth={self.depth}, {state})"


def prefetch(batches: Iterable, device: str | torch.device | None = None, *, depth: int = 2) -> Prefetcher:
    """The batches of `batches`, made ahead by a background thread and moved to `device` (None: left
    where they are); at most `depth` wait ready."""
    return Prefetcher(batches, device, depth=depth)
