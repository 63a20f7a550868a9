"""text_fields: the meta a text row keeps, a row without any string field, and the one read path of the
streamed text sources (nothing opened before the first sample, the shuffle recorded in provenance)."""

from __future__ import annotations

import pytest

from niels_gpt.data import text_fields
from niels_gpt.data.hub import HubRead
from niels_gpt.data.text_fields import iter_hub_text_samples, pretrain_samples
from tests.support.hub_files import write_parquet


def test_meta_keeps_the_index_and_the_scalar_meta_fields_a_row_has():
    rows = [(4, {"text": "a", "id": "x", "url": None, "tags": ["t"], "n": 2}), (9, {"text": "b"})]
    samples = list(pretrain_samples(rows, source="s", meta_fields=("id", "url", "tags", "n", "absent")))
    assert [(s.text, s.source, s.meta) for s in samples] == [
        ("a", "s", {"index": 4, "id": "x", "n": 2}),
        ("b", "s", {"index": 9}),
    ]


def test_row_without_string_field_fails_on_that_row(tmp_path):
    path = write_parquet(tmp_path / "bad.parquet", {"n": [1, 2]})
    samples = iter_hub_text_samples(HubRead("x/y", data_files=str(path)), source="s", meta_fields=())
    with pytest.raises(ValueError, match=r"keys: \['n'\]"):
        next(samples)


def test_nothing_is_opened_before_the_first_sample(monkeypatch):
    opened = []
    monkeypatch.setattr(text_fields, "open_dataset", lambda read, provenance=None: opened.append(read) or [])
    samples = iter_hub_text_samples(HubRead("x/y"), source="s", meta_fields=())
    assert opened == []
    with pytest.raises(StopIteration):  # the stand-in dataset has no rows
        next(samples)
    assert opened == [HubRead("x/y")]


@pytest.mark.parametrize("shuffle, recorded_buffer", [(True, 7), (False, 0)])
def test_the_shuffle_is_recorded_with_a_zero_buffer_when_off(tmp_path, shuffle, recorded_buffer):
    path = str(write_parquet(tmp_path / "t.parquet", {"text": [f"t{i}" for i in range(10)]}))
    read = HubRead("x/y", data_files=path, streaming=True, shuffle=shuffle, seed=5, shuffle_buffer_size=7)
    prov: dict = {}
    texts = [s.text for s in iter_hub_text_samples(read, source="s", meta_fields=(), provenance=prov)]
    assert sorted(texts) == sorted(f"t{i}" for i in range(10))
    assert (prov["shuffle"], prov["shuffle_buffer_size"], prov["seed"]) == (shuffle, recorded_buffer, 5)
    assert prov["local"] is True and prov["split"] == "train"
