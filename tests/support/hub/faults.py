"""Faults the test hub injects: which requests they hit, what happens to them, how many times.

A `Fault` matches a request by method (None: any) and a regular expression searched in the request's
path, percent-decoded and without its query (`/api/datasets/org/name/tree/<sha>/data/CC-MAIN-2024-10`,
`/datasets/org/name/resolve/<sha>/data/x.parquet`), and hits the first `count` matching requests:

  status   answer `status` (503, 429 ...) with an empty JSON error, `Retry-After: retry_after` if given
  reset    send the real status line, headers and `after_bytes` bytes of the body, then reset the
           connection (RST; `mode="fin"`: close it cleanly, a truncated body)
  stall    wait `seconds` before answering (`after_bytes` None), or after `after_bytes` bytes of the
           body, then go on as normal (a client that timed out finds the connection gone)

`Faults` is the server's thread-safe list: the first fault with hits left that matches takes the
request. Path patterns for the calls `datasets` makes are below (`REVISION_INFO`, `TREE`, ...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tests.support.hub.locked import LockedList

# Path patterns of the hub calls, for Fault(path=...)
REVISION_INFO = r"^/api/datasets/[^/]+/[^/]+/revision/"  # HfFileSystem's existence check, every load
DATASET_INFO = r"^/api/datasets/[^/]+/[^/]+$"  # a repository without README.md: its commit
TREE = r"^/api/datasets/[^/]+/[^/]+/tree/"  # data_files glob resolution
PATHS_INFO = r"^/api/datasets/[^/]+/[^/]+/paths-info/"
README = r"/resolve/[^/]+/README\.md$"
PARQUET = r"/resolve/[^/]+/.+\.parquet$"
JSONL = r"/resolve/[^/]+/.+\.jsonl$"

KINDS = ("status", "reset", "stall")


@dataclass
class Fault:
    """One fault; `hits` counts the requests it has taken (read it to see whether it fired)."""

    kind: str
    path: str
    method: str | None = None
    count: int = 1
    status: int = 503
    retry_after: float | None = None
    after_bytes: int | None = None
    mode: str = "rst"
    seconds: float = 0.0
    hits: int = field(default=0, compare=False)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"fault kind {self.kind!r}: expected one of {', '.join(KINDS)}")
        if self.mode not in ("rst", "fin"):
            raise ValueError(f"reset mode {self.mode!r}: expected 'rst' or 'fin'")
        re.compile(self.path)

    def matches(self, method: str, path: str) -> bool:
        return (self.method is None or self.method == method) and re.search(self.path, path) is not None

    @property
    def label(self) -> str:
        """How the request log names it: `status:503`, `reset:rst@1000`, `stall:3s@headers`."""
        if self.kind == "status":
            return f"status:{self.status}"
        if self.kind == "reset":
            return f"reset:{self.mode}@{self.after_bytes or 0}"
        where = "headers" if self.after_bytes is None else self.after_bytes
        return f"stall:{self.seconds:g}s@{where}"


def status(path: str, code: int = 503, *, count: int = 1, method: str | None = None) -> Fault:
    """`code` instead of the answer for the first `count` matching requests."""
    return Fault("status", path, method, count, status=code)


def rate_limit(path: str, retry_after: float = 1, *, count: int = 1, method: str | None = None) -> Fault:
    """429 with `Retry-After: retry_after` (seconds; huggingface_hub sleeps that plus 1 s)."""
    return Fault("status", path, method, count, status=429, retry_after=retry_after)


def reset(path: str, after_bytes: int = 0, *, count: int = 1, method: str | None = "GET", mode: str = "rst") -> Fault:
    """The connection reset after `after_bytes` bytes of the body (0: before any)."""
    return Fault("reset", path, method, count, after_bytes=after_bytes, mode=mode)


def stall(
    path: str, seconds: float, *, after_bytes: int | None = None, count: int = 1, method: str | None = None
) -> Fault:
    """`seconds` of silence before the answer, or after `after_bytes` bytes of its body."""
    return Fault("stall", path, method, count, seconds=seconds, after_bytes=after_bytes)


class Faults(LockedList[Fault]):
    """The faults a server injects (`add`, `clear`, `take`: thread-safe)."""

    def add(self, fault: Fault) -> Fault:
        return self.append(fault)

    def take(self, method: str, path: str) -> Fault | None:
        """The first fault with hits left that matches, its `hits` counted; None if none does."""
        with self._lock:
            for fault in self._items:
                if fault.hits < fault.count and fault.matches(method, path):
                    fault.hits += 1
                    return fault
        return None
