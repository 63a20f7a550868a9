"""How every command reports: milestones as one line each on stderr, progress as one tqdm policy.

stdout is left to what a command is asked for (`info`'s table, `verify`'s lines, `--json`); every
build step writes its milestones (`train: 1,234,567 tokens in 1 shard`) to stderr, which the
Snakemake rules send to the job's log. A progress bar is drawn only when stderr is a terminal, so
logs never fill with bar redraws.
"""

from __future__ import annotations

import sys


def log(message: str) -> None:
    """One milestone line on stderr, flushed at once (a killed job's log still shows it)."""
    print(message, file=sys.stderr, flush=True)


def is_terminal(stream) -> bool:
    """Whether `stream` is an open terminal; a closed, detached or missing stream (None) is not one."""
    try:
        return stream is not None and stream.isatty()
    except (ValueError, OSError):  # "I/O operation on closed file", a detached buffer, a bad descriptor
        return False


def progress(**kwargs):
    """A tqdm bar on stderr, shown only when stderr is a terminal; kwargs go to tqdm (total, desc, unit...).
    A closed stderr gets no bar (a disabled tqdm writes nothing), not an error."""
    from tqdm import tqdm

    kwargs.setdefault("dynamic_ncols", True)
    return tqdm(file=sys.stderr, disable=not is_terminal(sys.stderr), **kwargs)
