"""text_fields: the meta a text row keeps, a row without any string field, and the one read path of the
streamed text sources (nothing opened before the first sample, the shuffle recorded in provenance); a
streamed read mapped a block at a time (TextRows) gives the samples of the row-by-row rule."""

from __future__ import annotations

import pyarrow as pa
import pytest

from niels_gpt.data import text_fields
from niels_gpt.data.hub import HubRead
from niels_gpt.data.normalize import normalize_text
from niels_gpt.data.resumable import ShuffledStream
from niels_gpt.data.stream_files import Block
from niels_gpt.data.text_fields import TextRows, changeable, iter_hub_text_samples, pretrain_samples
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


# every character normalize_text removes or rewrites, next to the ones it keeps, at both ends of a text
TRICKY = [
    "plain",
    "a\r\nb\rc",
    "tab\tnl\n",
    "\x00\x1f\x7f",
    "C1 \x80\x9f",
    "kept \xa0\xa9 \u00e9",
    "soft\u00adhyphen",
    "zw\u200bsp",
    "wj\u2060",
    "\ufeffbom",
    "e\u0301 nfd",
    "zwj \u200c\u200d",
    "\u00ad",
    "\u200b",
    "\ufeff",
    "",
    "\u20ac\u2061 \ufefe\uffbf",
    "\u0080",
]


@pytest.mark.parametrize("string_type", [pa.string(), pa.large_string()])
def test_changeable_marks_exactly_the_texts_normalize_text_changes_beyond_nfc(string_type):
    import unicodedata

    column = pa.chunked_array([pa.array(TRICKY[:5], string_type), pa.array(["x"] + TRICKY[5:], string_type)[1:]])
    marked = changeable(column).tolist()
    assert marked == [normalize_text(t) != unicodedata.normalize("NFC", t) for t in TRICKY]


def test_a_block_maps_to_the_samples_of_the_row_by_row_rule():
    from datasets import Features

    n = len(TRICKY)
    table = pa.table(
        {
            "id": [f"id{i}" for i in range(n)],
            "text": [None if i % 7 == 3 else t for i, t in enumerate(TRICKY)],
            "title": [None if i % 2 else f"title {i}" for i in range(n)],
            "n": list(range(n)),
        }
    ).slice(1)
    mapper = TextRows(("id", "n", "absent"))
    block = Block(table, Features.from_arrow_schema(table.schema))
    assert mapper.block(block) == [mapper.row(row) for row in block.rows()]


def test_a_streamed_read_gives_the_samples_of_the_row_by_row_rule(tmp_path):
    rows = {
        "id": [f"d{i}" for i in range(60)],
        "text": [TRICKY[i % len(TRICKY)] * (i % 3) for i in range(60)],
        "score": [i / 7 for i in range(60)],
        "tags": [[str(i)] for i in range(60)],
    }
    path = str(write_parquet(tmp_path / "t.parquet", rows))
    for shuffle in (True, False):
        read = HubRead("x/y", data_files=path, streaming=True, shuffle=shuffle, seed=5, shuffle_buffer_size=7)
        streamed = list(iter_hub_text_samples(read, source="s", meta_fields=("id", "score", "tags")))
        rows = ShuffledStream(text_fields.open_dataset(read), read)  # datasets 5.2's order on every release
        by_row = list(pretrain_samples(iter(rows), source="s", meta_fields=("id", "score", "tags")))
        assert streamed == by_row
