"""select_text_field and the fineweb-edu / gutenberg row mapping (fixtures only, no network)."""

from __future__ import annotations

import pytest

from niels_gpt.data.fineweb_edu import iter_fineweb_edu
from niels_gpt.data.gutenberg import iter_gutenberg
from niels_gpt.data.text_fields import select_text_field
from tests.support.hub_files import write_parquet

pytestmark = pytest.mark.usefixtures("isolated_hf_cache")


def test_text_field_is_preferred():
    assert select_text_field({"id": "x1", "text": "the body", "content": "other"}) == "the body"


def test_first_string_field_without_text():
    assert select_text_field({"n": 3, "content": "the body", "title": "t"}) == "the body"


def test_non_string_text_falls_through_to_first_string_field():
    assert select_text_field({"text": None, "content": "c"}) == "c"


def test_no_string_field_raises_with_keys():
    with pytest.raises(ValueError) as e:
        select_text_field({"n": 1, "scores": [0.5], "flag": True})
    assert "['n', 'scores', 'flag']" in str(e.value)


def test_fineweb_local_rows_use_the_rule_and_normalize(tmp_path):
    path = write_parquet(tmp_path / "fw.parquet", {"content": ["Cafe\u0301\x00 one", "two\r\n"], "id": ["a", "b"]})
    samples = list(iter_fineweb_edu(data_files={"train": str(path)}, shuffle=False))
    assert [s.text for s in samples] == ["Caf\u00e9 one", "two\n"]
    assert [s.meta["id"] for s in samples] == ["a", "b"]
    assert all(s.source == "fineweb_edu" for s in samples)


def test_gutenberg_local_rows(tmp_path):
    path = write_parquet(tmp_path / "g.parquet", {"text": ["book one", "book two"], "id": ["1", "2"]})
    samples = list(iter_gutenberg(data_files={"train": str(path)}, shuffle=False))
    assert [(s.text, s.source, s.meta["id"]) for s in samples] == [
        ("book one", "gutenberg", "1"),
        ("book two", "gutenberg", "2"),
    ]


def test_row_without_string_field_fails_on_that_row(tmp_path):
    path = write_parquet(tmp_path / "bad.parquet", {"n": [1, 2]})
    with pytest.raises(ValueError, match=r"keys: \['n'\]"):
        next(iter_fineweb_edu(data_files={"train": str(path)}, shuffle=False))
