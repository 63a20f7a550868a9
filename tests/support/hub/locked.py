"""A list shared by the server's handler threads and the test: every operation under one lock."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class LockedList(Generic[T]):
    """append, clear, snapshot, iteration (over a snapshot) and len, each thread-safe."""

    def __init__(self):
        self._lock = threading.Lock()
        self._items: list[T] = []

    def append(self, item: T) -> T:
        with self._lock:
            self._items.append(item)
        return item

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def snapshot(self) -> list[T]:
        with self._lock:
            return list(self._items)

    def __iter__(self) -> Iterator[T]:
        return iter(self.snapshot())

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
