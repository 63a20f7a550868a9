"""dolly-15k: normalized contents, a row missing a field, and the loader on a local jsonl in the hub
schema (row order, the seeded torch shuffle, take, a read given whole)."""

from __future__ import annotations

import pytest

from niels_gpt.data.dolly import DATASET_ID, dolly_row_to_chat, iter_dolly_sft
from niels_gpt.data.hub import HubRead
from tests.support.hub_files import DOLLY_ROWS, write_jsonl


def test_contents_are_normalized():
    s = dolly_row_to_chat({**DOLLY_ROWS[1], "instruction": "Cafe\u0301\x07?", "context": "a\r\nb"}, 0)
    assert s.messages[0].content == "Caf\u00e9?\n\ncontext:\na\nb"


def test_missing_field_names_row_and_keys():
    with pytest.raises(ValueError, match=r"row 3: missing field\(s\) \['response'\]"):
        dolly_row_to_chat({"instruction": "x", "context": ""}, 3)


def _load(tmp_path, **kw):
    """The samples of a local dolly file read as `kw` (HubRead's split, seed, shuffle, take) say."""
    path = write_jsonl(tmp_path / "dolly.jsonl", DOLLY_ROWS * 5)
    return list(iter_dolly_sft(read=HubRead(DATASET_ID, data_files={"train": str(path)}, **kw)))


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


def test_a_read_given_whole_replaces_the_keywords_and_records_its_options(tmp_path):
    path = str(write_jsonl(tmp_path / "dolly.jsonl", DOLLY_ROWS * 5))
    prov: dict = {}
    read = HubRead(DATASET_ID, data_files=path, shuffle=True, seed=3, take=4)
    out = list(iter_dolly_sft(read=read, shuffle=False, take=None, provenance=prov))
    assert out == _load(tmp_path, shuffle=True, seed=3, take=4)
    assert (prov["shuffle"], prov["seed"], prov["num_rows"], prov["local"]) == (True, 3, 20, True)
