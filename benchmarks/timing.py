"""Timing and memory helpers shared by the benchmark scripts (run them as `python -m benchmarks.<name>`).

Every comparison interleaves its contenders within each round (`interleaved_rates`), so a change in the
machine's load hits all of them alike, and reports medians over rounds and the median of per-round ratios.
"""

from __future__ import annotations

import argparse
import resource
import statistics
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


def interleaved_rates(contenders: dict[str, Callable[[], object]], rounds: int, seconds: float) -> dict[str, list]:
    """{name: calls per second in each round}: every round times each contender for `seconds`, in turn."""
    rates: dict[str, list] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            rates[name].append(rate(fn, seconds))
    return rates


def ratios(numerators: list[float], denominators: list[float]) -> list[float]:
    """Per-round ratios; report their median (and min/max), which is robust to a noisy round."""
    return [a / b for a, b in zip(numerators, denominators)]


def spread(values: list[float], fmt: str = ".2f") -> str:
    """'median x (min a, max b)'."""
    return f"{statistics.median(values):{fmt}}x (min {min(values):{fmt}}x, max {max(values):{fmt}}x)"


def batch_arguments(doc: str, *, B: int | list[int] = 32, T: int = 1024, rounds: int = 7, seconds: float | None = 0.5):
    """The parser of a batch benchmark: --B (several when B is a list), --T, --rounds and, for benchmarks
    that time by duration, --seconds; add the benchmark's own options to it."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    if isinstance(B, list):
        ap.add_argument("--B", type=int, nargs="+", default=B, help=f"batch sizes (default: {B})")
    else:
        ap.add_argument("--B", type=int, default=B, help=f"batch size (default: {B})")
    ap.add_argument("--T", type=int, default=T, help=f"tokens per row (default: {T})")
    ap.add_argument("--rounds", type=int, default=rounds, help=f"interleaved rounds (default: {rounds})")
    if seconds is not None:
        ap.add_argument("--seconds", type=float, default=seconds, help=f"time per contender per round ({seconds})")
    return ap


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
