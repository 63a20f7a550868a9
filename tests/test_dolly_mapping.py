"""dolly-15k -> ChatSample: the row mapping exactly, meta, and the seeded torch shuffle."""

from __future__ import annotations

import pytest

from niels_gpt.data.dolly import SYSTEM_PROMPT, dolly_row_to_chat, iter_dolly_sft
from tests.support.hub_files import DOLLY_ROWS, write_jsonl

pytestmark = pytest.mark.usefixtures("isolated_hf_cache")

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


def test_contents_are_normalized():
    s = dolly_row_to_chat({**ROW, "instruction": "Cafe\u0301\x07?", "context": "a\r\nb"}, 0)
    assert s.messages[0].content == "Caf\u00e9?\n\ncontext:\na\nb"


def test_missing_field_names_row_and_keys():
    with pytest.raises(ValueError, match=r"row 3: missing field\(s\) \['response'\]"):
        dolly_row_to_chat({"instruction": "x", "context": ""}, 3)


def _load(tmp_path, **kw):
    path = write_jsonl(tmp_path / "dolly.jsonl", DOLLY_ROWS * 5)
    return list(iter_dolly_sft(data_files={"train": str(path)}, **kw))


def test_local_file_in_row_order_without_shuffle(tmp_path):
    samples = _load(tmp_path, shuffle=False)
    assert [s.meta["index"] for s in samples] == list(range(20))
    assert samples[1].messages[0].content == "Summarize.\n\ncontext:\nA long text."
    assert samples[1].meta["category"] == "summarization"


def test_shuffle_is_a_seeded_torch_permutation_of_rows(tmp_path):
    import torch

    a = _load(tmp_path, shuffle=True, seed=3)
    b = _load(tmp_path, shuffle=True, seed=3)
    c = _load(tmp_path, shuffle=True, seed=4)
    idx = [s.meta["index"] for s in a]
    assert idx == [s.meta["index"] for s in b]
    assert idx == torch.randperm(20, generator=torch.Generator().manual_seed(3)).tolist()
    assert idx != [s.meta["index"] for s in c]
    assert a[0] == dolly_row_to_chat(DOLLY_ROWS[idx[0] % 4], idx[0])  # the row mapping follows the index


def test_take_after_shuffle(tmp_path):
    full = _load(tmp_path, shuffle=True, seed=1)
    assert _load(tmp_path, shuffle=True, seed=1, take=3) == full[:3]
