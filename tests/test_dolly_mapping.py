"""dolly-15k -> ChatSample: a tiny fake row maps to 2 messages (3 with the system message), the context
block formatted exactly."""

from __future__ import annotations

import pytest

from niels_gpt.data.dolly import SYSTEM_PROMPT, dolly_row_to_chat

ROW = {
    "instruction": "Summarize this.",
    "context": "Rivers flow.\nTo the sea.",
    "response": "They flow.",
    "category": "summarization",
}


def test_two_messages_with_context_block_formatted_exactly():
    s = dolly_row_to_chat(ROW, 7)
    assert [m.role for m in s.messages] == ["user", "assistant"]
    assert s.messages[0].content == "Summarize this.\n\ncontext:\nRivers flow.\nTo the sea."
    assert s.messages[1].content == "They flow."
    assert s.source == "dolly15k"
    assert s.meta == {"index": 7, "category": "summarization"}


def test_include_system_prepends_the_fixed_system_message():
    s = dolly_row_to_chat(ROW, 0, include_system=True)
    assert [m.role for m in s.messages] == ["system", "user", "assistant"]
    assert s.messages[0].content == SYSTEM_PROMPT == "you are a helpful assistant."


@pytest.mark.parametrize("context", ["", "   ", "\n\t", None])
def test_blank_context_adds_nothing(context):
    s = dolly_row_to_chat({**ROW, "context": context}, 0)
    assert s.messages[0].content == "Summarize this."
