"""The leakage heatmap and table (leakage_view.py), drawn from leakage.json alone."""

from __future__ import annotations

from html.parser import HTMLParser

from niels_gpt.layout import REPORT_FIGURES
from niels_gpt.report.leakage_view import draw_leakage, table_html
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


RESULT = {  # a leakage.json of two spaces, one val split above the gate, one with nothing found
    "format_version": 1,
    "n": {"tokens": 13, "bytes": 50},
    "max_fraction": 0.05,
    "train_splits": [
        {"name": "pretrain/a<b>", "space": "tokens", "positions": 100},
        {"name": "streams/w", "space": "bytes", "positions": 50},
    ],
    "val_splits": [
        {
            "name": "pretrain/a<b>",
            "space": "tokens",
            "unit": "document",
            "units": 2,
            "ngrams": 40,
            "fraction_any": 0.25,
            "fraction": {"pretrain/a<b>": 0.25},
            "top": [
                {
                    "unit": 1,
                    "start": 9,
                    "ngrams": 20,
                    "fraction": 0.5,
                    "worst_train": "pretrain/a<b>",
                    "by_train": {"pretrain/a<b>": 0.5},
                    "excerpt": "if a < b: <|eot|>",
                }
            ],
        },
        {
            "name": "streams/w",
            "space": "bytes",
            "unit": "segment",
            "units": 3,
            "ngrams": 9,
            "fraction_any": 0.0,
            "fraction": {"streams/w": 0.0},
            "top": [],
        },
    ],
    "skipped": [{"name": "sft/x", "reason": "not built: off"}],
}


def test_the_table_escapes_text_marks_cells_above_the_gate_and_says_what_was_left_out():
    page = table_html(RESULT)
    assert "pretrain/a&lt;b&gt; val" in page and "if a &lt; b: &lt;|eot|&gt;" in page and "<b>" not in page
    assert '<td class="hi">25.00%</td>' in page and "gate: leakage.max_fraction = 0.05" in page
    assert "<td>0.00%</td>" in page and "no n-gram found in any train split" in page
    assert "<p>left out: sft/x: not built: off</p>" in page
    assert "report only" in table_html(dict(RESULT, max_fraction=None)) and 'class="hi"' not in table_html(
        dict(RESULT, max_fraction=None)
    )


def test_draw_leakage_writes_the_heatmap_and_the_table_from_the_result_alone(tmp_path):
    svg, page = draw_leakage(RESULT, tmp_path)
    assert (svg.name, page.name) == REPORT_FIGURES["leakage"]
    text = svg.read_text()
    assert "pretrain/a&lt;b&gt; val" in text and "streams/w train" in text and "any train" in text
    assert "13-token grams" in text and "50-byte grams" in text and "sft/x: not built: off" in text
    assert page.read_text() == table_html(RESULT)
