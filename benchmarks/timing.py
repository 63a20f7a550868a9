"""Timing helper shared by the benchmark scripts (run them as `python -m benchmarks.<name>`)."""

from __future__ import annotations

import time
from collections.abc import Callable


def rate(fn: Callable[[], object], seconds: float) -> float:
    """Calls per second of fn() over about `seconds` (at least one call)."""
    n, start = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return n / elapsed
