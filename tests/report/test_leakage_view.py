"""The leakage heatmap and table (leakage_view.py), drawn from leakage.json alone."""

from __future__ import annotations

from html.parser import HTMLParser

from niels_gpt.report.leakage_view import table_html
from tests.support.cache_tree import PLANTED_DOC, WIKI_VAL


def test_leakage_table_is_self_contained_html_naming_the_planted_document(results):
    page = table_html(results[1])

    external = []

    class Links(HTMLParser):
        def handle_starttag(self, tag, attrs):
            external.extend(v for k, v in attrs if k in ("src", "href") and v and "://" in v)

    Links().feed(page)
    assert external == [] and "<script" not in page
    assert " ".join(WIKI_VAL[PLANTED_DOC].split())[:30] in page
    assert f"<tr><td>{PLANTED_DOC}</td>" in page
