"""The cache tree the inspection tests read (and damage: a new one per test)."""

from __future__ import annotations

import pytest

from tests.support.cache_tree import build_tree


@pytest.fixture
def tree(tmp_path, tiny_tokenizer, tiny_tokenizer_path):
    return build_tree(tmp_path, tiny_tokenizer, tiny_tokenizer_path)
