"""The leakage audit: a planted duplicate is found and named far above the baseline; the gate fails with it."""

from __future__ import annotations

import numpy as np
import pytest

from niels_gpt.report.leakage import LeakageError, audit, check_gate
from tests.support.cache_tree import PLANTED_DOC, PLANTED_SEGMENT, WIKI_SEGMENTS, WIKI_VAL

N = {"n_tokens": 13, "n_bytes": 50}


def val_row(result: dict, name: str) -> dict:
    return next(v for v in result["val_splits"] if v["name"] == name)


def test_planted_val_document_is_named_with_the_train_split_that_holds_it(results, tiny_tokenizer):
    clean, planted = (val_row(r, "pretrain/wikitext") for r in results)
    worst = planted["top"][0]
    assert (worst["unit"], worst["fraction"], worst["worst_train"]) == (PLANTED_DOC, 1.0, "pretrain/roam")
    assert worst["by_train"]["pretrain/roam"] == 1.0
    assert worst["ngrams"] == len(tiny_tokenizer.encode(WIKI_VAL[PLANTED_DOC])) - 12
    assert " ".join(WIKI_VAL[PLANTED_DOC].split())[:40] in worst["excerpt"]
    share = worst["ngrams"] / planted["ngrams"]
    assert planted["fraction"]["pretrain/roam"] >= share - 1e-6  # JSON fractions keep 6 digits
    assert planted["fraction"]["pretrain/roam"] > 20 * max(clean["fraction"]["pretrain/roam"], 1e-3)


def test_planted_stream_segment_is_named_in_the_byte_space(results):
    clean, planted = (val_row(r, "streams/wiki") for r in results)
    worst = planted["top"][0]
    assert (worst["unit"], worst["fraction"], worst["worst_train"]) == (PLANTED_SEGMENT, 1.0, "streams/roam")
    assert worst["excerpt"].startswith(" ".join(WIKI_SEGMENTS["val"][PLANTED_SEGMENT].split())[:40])
    assert planted["fraction"]["streams/roam"] > 20 * max(clean["fraction"]["streams/roam"], 1e-3)
    assert set(planted["fraction"]) == {"streams/wiki", "streams/roam"}  # bytes never meet token splits


def test_ngrams_never_span_two_documents_or_examples(results, tiny_tokenizer):
    wiki = val_row(results[0], "pretrain/wikitext")
    assert wiki["units"] == len(WIKI_VAL)
    assert wiki["ngrams"] == sum(max(len(tiny_tokenizer.encode(d)) - 12, 0) for d in WIKI_VAL)
    primer = val_row(results[0], "sft/primer")
    assert primer["unit"] == "example" and set(primer["fraction"]) == {
        "pretrain/wikitext",
        "pretrain/roam",
        "sft/primer",
    }


def test_caches_not_built_are_listed_not_dropped(results):
    skipped = {k["name"]: k["reason"] for k in results[0]["skipped"]}
    assert skipped["pretrain/fineweb_edu"] == "not built: sources.fineweb_edu.enabled is false"
    assert "sft/dolly15k" in skipped and "streams/primer" in skipped


def test_gate_fails_naming_the_worst_pair_and_document(results):
    planted = dict(results[1], max_fraction=0.02)
    with pytest.raises(LeakageError) as err:
        check_gate(planted)
    message = str(err.value)
    assert "leakage.max_fraction = 2%" in message
    assert "pretrain/wikitext val in pretrain/roam train" in message
    assert f"document {PLANTED_DOC} (100.0% of its" in message
    check_gate(dict(results[1], max_fraction=None))  # report only
    check_gate(dict(results[1], max_fraction=1.0))


def test_fractions_count_ngram_positions_not_distinct_ngrams(planted_tree, tiny_tokenizer):
    """A val n-gram that occurs twice counts twice: the fraction is a share of the val text."""
    result = audit(planted_tree, **N, top=0, tokenizer=None, log=lambda _: None)
    wiki = val_row(result, "pretrain/wikitext")
    assert wiki["top"] == []
    tokens = np.concatenate([tiny_tokenizer.encode(d) for d in WIKI_VAL]).size
    assert wiki["ngrams"] <= tokens
