"""fineweb-edu: the default hub call, local rows through the field rule and normalization, a read given whole."""

from __future__ import annotations

from dataclasses import replace

import pytest

from niels_gpt.data.fineweb_edu import DATASET_ID, iter_fineweb_edu
from niels_gpt.data.hub import HubRead
from tests.support.hub_files import write_parquet


def test_default_calls_load_dataset_with_hub_id_config_split_streaming_revision(counting_hub):
    calls, _, _ = counting_hub
    next(iter_fineweb_edu(take=1, shuffle=False))
    assert calls == [
        (("HuggingFaceFW/fineweb-edu", "CC-MAIN-2024-10"), {"split": "train", "streaming": True, "revision": None})
    ]


def test_default_is_a_buffer_shuffle_recorded_in_provenance(counting_hub):
    prov: dict = {}
    first = [s.meta["id"] for s in iter_fineweb_edu(take=20, seed=3, shuffle_buffer_size=50, provenance=prov)]
    assert len(first) == 20 and first != [str(i) for i in range(20)]  # meta["index"] is the stream position
    assert (prov["shuffle"], prov["shuffle_buffer_size"], prov["seed"]) == (True, 50, 3)


def test_fineweb_local_rows_use_the_rule_and_normalize(tmp_path):
    path = write_parquet(tmp_path / "fw.parquet", {"content": ["Cafe\u0301\x00 one", "two\r\n"], "id": ["a", "b"]})
    samples = list(iter_fineweb_edu(read=HubRead(DATASET_ID, data_files={"train": str(path)}, streaming=True)))
    assert [s.text for s in samples] == ["Caf\u00e9 one", "two\n"]
    assert [s.meta["id"] for s in samples] == ["a", "b"]
    assert all(s.source == "fineweb_edu" for s in samples)


def test_a_read_given_whole_replaces_the_keywords(tmp_path):
    path = str(write_parquet(tmp_path / "fw.parquet", {"text": [f"doc {i}" for i in range(30)]}))
    read = HubRead(DATASET_ID, "CC-MAIN-2024-10", data_files=path, streaming=True, take=4)
    got = [s.text for s in iter_fineweb_edu(read=read, take=1, shuffle=True, seed=5)]
    assert got == ["doc 0", "doc 1", "doc 2", "doc 3"]


def test_a_part_of_a_read_is_a_contiguous_block_of_its_files(tmp_path):
    for i in range(4):
        write_parquet(tmp_path / f"p{i}.parquet", {"text": [f"file {i} doc {j}" for j in range(3)]})
    read = HubRead(DATASET_ID, data_files=str(tmp_path / "*.parquet"), streaming=True)
    parts = [[s.text for s in iter_fineweb_edu(read=replace(read, num_parts=2, part=k))] for k in (0, 1)]
    assert parts[0] + parts[1] == [s.text for s in iter_fineweb_edu(read=read)]
    assert parts[0][-1] == "file 1 doc 2" and parts[1][0] == "file 2 doc 0"
    with pytest.raises(ValueError, match="has 4 data file"):
        next(iter_fineweb_edu(read=replace(read, num_parts=5, part=0)))
