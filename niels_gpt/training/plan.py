"""The plan fingerprint of a MixedLoader: what its saved position means, checked before a resume.

A loader's fingerprint is a small dict of plain values:
  version     STATE_VERSION (the layout of states and the meaning of their positions)
  mode        "random" or "epoch"
  seed, schedule, B, T, world_size (schedule: compared by MixedLoader.load_state_dict up to the saved step)
  rank        the rank in epoch mode (each rank's cursors are its own); None in random mode, whose
              state is just the step, the same on every rank, so any rank may load it
  caches      {source: identity}: each reader's digest of its data, taken from meta.json (pretrain
              shard sha256s, SFT file sha256s, stream sha256s; sizes when there is no meta.json), or
              None for a source that has no `identity`
`refuse_other_plan(saved, mine)` raises one ValueError naming every field (and every cache) that
differs, so a run never resumes into other data, another mixture or another shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

STATE_VERSION = 4  # 2: the fingerprint (and epoch positions); 3: a schedule, credits over a unit; 4: random-mode ledger
_SHOWN_DIGEST = 12  # hex digits of a cache identity shown in an error


def _show(value: Any) -> str:
    if isinstance(value, str) and len(value) == 64:
        return repr(value[:_SHOWN_DIGEST] + "...")
    return repr(value)


def plan_changes(saved: Mapping[str, Any], mine: Mapping[str, Any]) -> list[str]:
    """'field: state has X, loader has Y' for every field of `mine` that `saved` holds differently."""
    changes = []
    for key, value in mine.items():
        if key == "caches":
            theirs = saved.get(key) if isinstance(saved.get(key), Mapping) else {}
            for name in sorted(set(theirs) | set(value)):
                if theirs.get(name) != value.get(name):
                    changes.append(
                        f"caches[{name!r}]: state has {_show(theirs.get(name))}, loader has {_show(value.get(name))}"
                    )
        elif saved.get(key) != value:
            changes.append(f"{key}: state has {saved.get(key)!r}, loader has {value!r}")
    return changes


def refuse_other_plan(saved: Any, mine: Mapping[str, Any]) -> None:
    """Raise unless `saved` (a state's "fingerprint") equals `mine` field by field."""
    if not isinstance(saved, Mapping):
        raise ValueError(
            f"refusing to resume: the state has no plan fingerprint (it was saved by an older niels_gpt; "
            f"this loader writes state version {STATE_VERSION}); start a fresh run, or resume with the version "
            "that saved it"
        )
    changes = plan_changes(saved, mine)
    if changes:
        raise ValueError(
            f"refusing to resume from a state of a different loader ({'; '.join(changes)}); build the loader "
            "with the saved settings and caches, or start a fresh run"
        )
