"""The plan fingerprint check: one message naming every difference, caches by name."""

from __future__ import annotations

import pytest

from niels_gpt.training.plan import STATE_VERSION, plan_changes, refuse_other_plan

MINE = {
    "version": STATE_VERSION,
    "mode": "epoch",
    "seed": 1,
    "p": {"a": 0.5, "b": 0.5},
    "B": 32,
    "T": 1024,
    "rank": 0,
    "world_size": 2,
    "caches": {"a": "a" * 64, "b": "b" * 64},
}


def test_the_same_plan_passes_and_every_difference_is_named_once():
    refuse_other_plan(dict(MINE), MINE)
    saved = {**MINE, "B": 16, "world_size": 4, "caches": {"a": "a" * 64, "b": "c" * 64, "old": "d" * 64}}
    with pytest.raises(ValueError) as e:
        refuse_other_plan(saved, MINE)
    message = str(e.value)
    assert message.startswith("refusing to resume from a state of a different loader (B: state has 16, loader has 32; ")
    assert "caches['b']: state has 'cccccccccccc...', loader has 'bbbbbbbbbbbb...'" in message
    assert "caches['old']: state has 'dddddddddddd...', loader has None" in message and "caches['a']" not in message
    assert len(plan_changes(saved, MINE)) == 4  # B, world_size, caches['b'], caches['old']


def test_a_state_without_fingerprint_is_refused_with_the_reason():
    with pytest.raises(ValueError, match=f"no plan fingerprint.*state version {STATE_VERSION}"):
        refuse_other_plan(None, MINE)
