"""training/prefetch.py: the prefetched batches are the iterator's, in order; the thread runs at most depth + 1
batches ahead, hands the iterator's exception to the consumer, stops when closed or dropped, and reports the
state of the last batch handed out; its CUDA branch (a side stream, an event per batch that the consumer's
stream waits for, pinned non-blocking copies) runs here with the CUDA calls faked."""

from __future__ import annotations

import gc
import threading
import time
from dataclasses import dataclass

import pytest
import torch

from niels_gpt.training.loader import MixedLoader
from niels_gpt.training.prefetch import move, prefetch
from tests.support.fake_cuda import FakeCuda, FakeEvent

MIX = {"fineweb_edu": 0.5, "wikitext": 0.3, "gutenberg": 0.2}
WAIT_S = 5.0  # the longest a test waits for the thread (it needs milliseconds)


def loader(caches, mode: str = "epoch") -> MixedLoader:
    return MixedLoader.pretrain(caches, "train", p=MIX, T=16, B=4, seed=7, mode=mode)


def same(a, b) -> bool:
    """Two Batches hold the same tensors and numbers."""
    return all(
        torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y for x, y in zip(vars(a).values(), vars(b).values())
    )


def wait_until(condition) -> bool:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


@pytest.mark.parametrize("mode", ["random", "epoch"])
def test_prefetched_batches_are_the_loaders_in_order(loader_caches, mode):
    straight = loader(loader_caches, mode)
    want = [next(straight) for _ in range(12)]
    with prefetch(loader(loader_caches, mode), "cpu", depth=3) as batches:
        got = [next(batches) for _ in range(12)]
    assert all(same(a, b) for a, b in zip(got, want)) and [b.step for b in got] == list(range(12))


def test_a_finite_iterator_ends_after_its_last_batch():
    rows = [{"input_ids": torch.full((2, 3), k)} for k in range(5)]
    got = list(prefetch(iter(rows), depth=1))
    assert [int(b["input_ids"][0, 0]) for b in got] == list(range(5))


def test_the_thread_makes_at_most_depth_plus_one_batches_ahead():
    made = []

    def endless():
        while True:
            made.append(len(made))
            yield torch.tensor(made[-1])

    batches = prefetch(endless(), depth=2)
    assert wait_until(lambda: len(made) == 3)  # 2 in the queue, 1 waiting to be put
    time.sleep(0.1)
    assert len(made) == 3
    assert [int(next(batches)) for _ in range(4)] == [0, 1, 2, 3]
    batches.close()


def test_the_iterators_exception_reaches_the_consumer_after_the_batches_before_it():
    def failing():
        yield from (torch.tensor(k) for k in range(3))
        raise OSError("shard_00003.bin: read failed")

    batches = prefetch(failing())
    assert [int(next(batches)) for _ in range(3)] == [0, 1, 2]
    with pytest.raises(OSError, match="shard_00003.bin: read failed"):
        next(batches)
    with pytest.raises(StopIteration):
        next(batches)


def endless_counter():
    k = 0
    while True:
        yield torch.tensor(k)
        k += 1


def test_close_and_garbage_collection_stop_the_thread():
    batches = prefetch(endless_counter())
    thread = batches._thread
    next(batches)
    batches.close()
    assert not thread.is_alive()
    with pytest.raises(StopIteration):
        next(batches)

    with prefetch(endless_counter()) as batches:
        thread = batches._thread
    assert not thread.is_alive()

    batches = prefetch(endless_counter(), depth=1)
    thread = batches._thread
    next(batches)
    del batches
    gc.collect()
    thread.join(WAIT_S)
    assert not thread.is_alive()
    assert wait_until(lambda: not [t for t in threading.enumerate() if t.name == "niels_gpt-prefetch"])


def test_state_dict_is_the_state_after_the_last_batch_handed_out(loader_caches):
    straight = loader(loader_caches)
    want = [next(straight) for _ in range(9)]
    ahead = loader(loader_caches)
    batches = prefetch(ahead, depth=2)
    assert batches.state_dict() == loader(loader_caches).state_dict()
    for _ in range(5):
        next(batches)
    assert wait_until(lambda: ahead.step == 8)  # the thread read 3 batches more than were handed out
    state = batches.state_dict()
    batches.close()
    assert state["step"] == 5
    resumed = loader(loader_caches)
    resumed.load_state_dict(state)
    assert all(same(next(resumed), b) for b in want[5:])
    with pytest.raises(TypeError, match="no state_dict"):
        prefetch(iter([1])).state_dict()


@dataclass(frozen=True)
class Rows:
    x: torch.Tensor
    step: int


def test_move_keeps_the_structure_of_a_batch():
    batch = {"a": (torch.zeros(2), [torch.ones(1)]), "rows": Rows(torch.arange(3), step=4), "name": "oasst1"}
    moved = move(batch, torch.device("cpu"))
    assert moved["name"] == "oasst1" and moved["rows"].step == 4 and torch.equal(moved["rows"].x, torch.arange(3))
    assert isinstance(moved["a"], tuple) and isinstance(moved["a"][1], list)


def test_cuda_batches_are_copied_on_a_side_stream_that_the_consumer_waits_for(loader_caches, monkeypatch):
    fake = FakeCuda(monkeypatch)
    straight = loader(loader_caches, "random")
    want = [next(straight).as_dict() for _ in range(4)]
    with prefetch((b.as_dict() for b in loader(loader_caches, "random")), "cuda", depth=2) as batches:
        got = [next(batches) for _ in range(4)]
    assert fake.all_pinned_and_non_blocking() and len(fake.copies) >= 4 * len(got[0])
    assert fake.stream_contexts == [fake.side_stream]  # the thread ran under its own stream
    assert all(torch.equal(a[key], b[key]) for a, b in zip(got, want) for key in b)
    # every batch: its event recorded on the side stream, then waited for by the consumer's stream, in order
    waits = [(event, stream) for what, event, stream in fake.log if what == "wait"]
    records = [(event, stream) for what, event, stream in fake.log if what == "record"]
    assert len(waits) == 4 and all(isinstance(e, FakeEvent) and s is fake.main_stream for e, s in waits)
    assert [e for e, _ in waits] == [e for e, _ in records[:4]] and all(s is fake.side_stream for _, s in records)
