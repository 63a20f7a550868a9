"""Timing and memory helpers shared by the benchmark scripts (run them as `python -m benchmarks.<name>`)."""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from pathlib import Path


def rate(fn: Callable[[], object], seconds: float) -> float:
    """Calls per second of fn() over about `seconds` (at least one call)."""
    n, start = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return n / elapsed


def peak_rss_mb(pid: int | str = "self") -> float:
    """Peak RSS of a process image (this one by default). Linux carries ru_maxrss over from the parent
    through fork+exec (a child of a 500 MB parent reports >= 500 MB), so read VmHWM of the process's
    current mm when available. Raises OSError for another process that has exited."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        if pid != "self":
            raise
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
