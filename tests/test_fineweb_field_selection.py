"""select_text_field: "text" preferred, else the first string field, else a ValueError showing the keys
(fixture dicts only, no network)."""

from __future__ import annotations

import pytest

from niels_gpt.data.text_fields import select_text_field


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
