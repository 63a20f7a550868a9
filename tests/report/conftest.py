"""The cache trees the report tests read (never change them: they are built once per session)."""

from __future__ import annotations

import pytest

from tests.support.cache_tree import build_report_tree, build_special_tree


@pytest.fixture(scope="session")
def report_tree(tmp_path_factory, tiny_tokenizer, tiny_tokenizer_path):
    """The registry-named tree, no duplicates planted."""
    return build_report_tree(tmp_path_factory.mktemp("clean"), tiny_tokenizer, tiny_tokenizer_path, plant=False)


@pytest.fixture(scope="session")
def planted_tree(tmp_path_factory, tiny_tokenizer, tiny_tokenizer_path):
    """The same tree with a wikitext val document and a wiki val segment copied into roam's train side."""
    return build_report_tree(tmp_path_factory.mktemp("planted"), tiny_tokenizer, tiny_tokenizer_path, plant=True)


@pytest.fixture(scope="session")
def special_tree(tmp_path_factory, tiny_tokenizer, tiny_tokenizer_path):
    """SFT caches whose train and val share text only across special tokens."""
    return build_special_tree(tmp_path_factory.mktemp("special"), tiny_tokenizer, tiny_tokenizer_path)


@pytest.fixture(scope="session")
def results(report_tree, planted_tree, tiny_tokenizer):
    """The leakage audit of (report_tree, planted_tree): 13-token and 50-byte grams, 3 units listed."""
    from niels_gpt.report.leakage import audit

    return tuple(
        audit(t, n_tokens=13, n_bytes=50, top=3, tokenizer=tiny_tokenizer, log=lambda _: None)
        for t in (report_tree, planted_tree)
    )
