"""oasst1 message tree -> threads: a tiny hardcoded tree (root prompter -> assistant -> prompter ->
assistant, in two branches) through the reconstruction helper; every thread alternates user/assistant,
max_messages is enforced, meta names the message ids."""

from __future__ import annotations

import pytest

from niels_gpt.data.oasst1 import reconstruct_threads
from tests.support.hub_files import OASST_BRANCHING as BRANCHING


def ids(samples):
    return [s.meta["message_ids"] for s in samples]


def test_every_root_to_leaf_thread_of_a_branching_tree():
    out = reconstruct_threads(BRANCHING)
    assert ids(out) == [["r", "a1", "p2", "a3"], ["r", "a1", "p3", "a4"], ["r", "a2"]]
    first = out[0]
    assert [m.role for m in first.messages] == ["user", "assistant", "user", "assistant"]
    assert first.messages[2].content == "prompter p2"
    assert first.meta == {"message_tree_id": "t", "leaf_message_id": "a3", "message_ids": ["r", "a1", "p2", "a3"]}
    assert first.source == "oasst1"


def test_threads_alternate_start_with_user_end_with_assistant_and_invent_no_system():
    for s in reconstruct_threads(BRANCHING):
        roles = [m.role for m in s.messages]
        assert roles == ["user", "assistant"] * (len(roles) // 2)


def test_max_messages_cuts_and_emits_duplicates_once():
    assert ids(reconstruct_threads(BRANCHING, max_messages=3)) == [["r", "a1"], ["r", "a2"]]
    assert ids(reconstruct_threads(BRANCHING, max_messages=2)) == [["r", "a1"], ["r", "a2"]]
    with pytest.raises(ValueError, match="max_messages"):
        reconstruct_threads(BRANCHING, max_messages=1)
