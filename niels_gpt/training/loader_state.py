"""Loading a torchdata StatefulDataLoader state, refused with one clear error when the worker count differs.

A StatefulDataLoader state is laid out by the loader's num_workers: a single-process loader (0 workers)
saves a flat dict with "_num_yielded"; a loader with k > 0 workers saves {"_snapshot": {"_main_snapshot":
{"_num_workers": k, ...}, "_worker_snapshots": {"worker_0": ..., ...}}, ...}. Loading a state of another
count fails inside torchdata on an assert (which `python -O` removes), and a mixture's positions are kept
per worker (mixture.py), so a state only resumes into a loader with the same num_workers.
`saved_num_workers(state)` reads that count; `check_num_workers(loader, state)` refuses a state of another
count with one ValueError naming both; `load_loader_state(loader, state)` checks, then calls
`loader.load_state_dict(state)`. `stateful_loader(dataset, **options)` is a StatefulDataLoader whose own
`load_state_dict` checks first, so the plain call refuses with the same message. torchdata is imported only
by `stateful_loader`.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Mapping
from typing import Any


def saved_num_workers(state: Mapping[str, Any]) -> int:
    """The num_workers of the StatefulDataLoader that saved `state` (0: single process)."""
    if isinstance(state, Mapping) and "_num_yielded" in state:
        return 0
    try:
        return int(state["_snapshot"]["_main_snapshot"]["_num_workers"])
    except (KeyError, TypeError, ValueError):
        raise ValueError(
            "not a StatefulDataLoader state: it has neither '_num_yielded' (saved without workers) nor "
            "'_snapshot' -> '_main_snapshot' -> '_num_workers' (saved with workers)"
        ) from None


def check_num_workers(loader, state: Mapping[str, Any]) -> None:
    """Refuse, with one ValueError, a `state` saved with another num_workers than `loader`'s ({} passes)."""
    if state:
        saved = saved_num_workers(state)
        if saved != loader.num_workers:
            raise ValueError(
                f"refusing to resume: the state was saved by a loader with num_workers={saved} and this loader has "
                f"num_workers={loader.num_workers}; build the StatefulDataLoader with num_workers={saved} to resume it"
            )


def load_loader_state(loader, state: Mapping[str, Any]) -> None:
    """`loader.load_state_dict(state)` once `state` proves saved with the loader's num_workers ({} loads as is)."""
    check_num_workers(loader, state)
    loader.load_state_dict(state)


@functools.lru_cache(maxsize=1)
def _checked_loader_class():
    from torchdata.stateful_dataloader import StatefulDataLoader

    class CheckedStatefulDataLoader(StatefulDataLoader):
        """A StatefulDataLoader whose load_state_dict refuses a state saved with another num_workers."""

        def load_state_dict(self, state_dict: dict[str, Any]) -> None:
            check_num_workers(self, state_dict)
            super().load_state_dict(state_dict)

    return CheckedStatefulDataLoader


def stateful_loader(dataset, **options):
    """torchdata's `StatefulDataLoader(dataset, **options)`, whose plain `load_state_dict` refuses a state saved
    with another num_workers with `check_num_workers`' message (torchdata's own fails on an assert).
    torchdata 0.11 calls torch.set_vital, which torch 2.13 deprecates: that warning is not the user's to see."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="'set_vital' is deprecated", category=UserWarning)
        return _checked_loader_class()(dataset, **options)
