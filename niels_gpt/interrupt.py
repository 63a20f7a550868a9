"""A Ctrl-C that is never lost: once the user interrupts a command, nothing more is published.

Python turns SIGINT into a KeyboardInterrupt at the next bytecode, but one raised while a C extension
module initializes (numpy.random, pyarrow, ... imported lazily in the middle of a build) can be
swallowed there, and the build would go on and publish its cache. `recorded()` (around the command
`command_line.run_cli` runs) records every SIGINT before raising it; `check()`, called by atomic.py
before any file is renamed onto its final name, raises KeyboardInterrupt again if one was recorded.
Outside `recorded()` (the package used as a library) `check()` does nothing.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

_received = threading.Event()


def _on_sigint(signum, frame) -> None:
    _received.set()
    raise KeyboardInterrupt


@contextlib.contextmanager
def recorded() -> Iterator[None]:
    """Record SIGINT inside the block (main thread only; elsewhere nothing changes), then restore the
    handler that was there and forget it."""
    _received.clear()
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        _received.clear()


def check() -> None:
    """KeyboardInterrupt if a SIGINT was recorded: a publish step must not run after a Ctrl-C."""
    if _received.is_set():
        raise KeyboardInterrupt
