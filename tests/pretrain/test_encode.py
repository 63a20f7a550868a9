"""Batched tokenization for the pretrain writer (pretrain/encode.py): batch limits, blank documents, the
flat uint16 layout with eot after every non-empty document, input order whatever the batching."""

from __future__ import annotations

import numpy as np
import pytest

from niels_gpt.data.types import PretrainSample
from niels_gpt.pretrain import encode
from niels_gpt.pretrain.encode import encode_documents, encoded_batches, join_documents, text_batches, text_of
from niels_gpt.token_files import pack_tokens
from niels_gpt.tokenizer.workers import EncodeWorkers
from tests.support.corpus import tiny_corpus


def test_text_of_takes_a_str_or_anything_with_a_text():
    assert text_of("plain") == "plain" and text_of(PretrainSample("doc", "x", {})) == "doc"
    with pytest.raises(TypeError, match="pretrain input must yield str or PretrainSample, got int"):
        text_of(3)


def test_batches_hold_at_most_batch_docs_documents(monkeypatch):
    monkeypatch.setattr(encode, "BATCH_DOCS", 4)
    batches = list(text_batches(iter([f"doc {i}" for i in range(10)]), lambda: float("inf")))
    assert [len(b) for b in batches] == [4, 4, 2] and sum(batches, []) == [f"doc {i}" for i in range(10)]


def test_a_batch_stops_at_the_characters_wanted_but_holds_at_least_one_document():
    texts = ["a" * 10] * 6
    assert [len(b) for b in text_batches(iter(texts), lambda: 25)] == [3, 3]  # stops once 25 chars are reached
    assert [len(b) for b in text_batches(iter(texts), lambda: 1)] == [1] * 6


def test_blank_documents_become_empty_strings():
    (batch,) = text_batches(iter(["x", "  \n\t", "", "\u3000"]), lambda: float("inf"))
    assert batch == ["x", "", "", ""]


def test_encoded_documents_are_followed_by_eot_except_blank_ones(tiny_tokenizer):
    texts = ["the river", "", "stone light"]
    flat, lens = encode_documents(tiny_tokenizer, texts)
    first, second = tiny_tokenizer.encode(texts[0]), tiny_tokenizer.encode(texts[2])
    eot = tiny_tokenizer.eot_id
    assert flat.dtype == np.dtype("<u2") and flat.tolist() == [*first, eot, *second, eot]
    assert lens == [len(first), 0, len(second)]  # eot not counted


def test_joined_documents_are_the_packed_id_lists():
    rng = np.random.default_rng(0)
    lists = [rng.integers(0, 1 << 16, int(n)).tolist() for n in rng.integers(0, 40, 50)] + [[]]
    arrays = [np.array(ids, dtype=np.int32) for ids in lists]
    assert join_documents(arrays, 3).tobytes() == pack_tokens(lists, end=3).tobytes()
    assert join_documents([], 3).dtype == join_documents([np.zeros(0, np.int32)], 3).dtype == np.dtype("<u2")
    assert len(join_documents([], 3)) == len(join_documents([np.zeros(0, np.int32)], 3)) == 0


@pytest.mark.parametrize("batch_docs, workers", [(3, 1), (7, 2)])
def test_batches_come_back_in_input_order_whatever_the_batching(tiny_tokenizer, monkeypatch, batch_docs, workers):
    texts = tiny_corpus(30, seed=5)
    want, want_lens = encode_documents(tiny_tokenizer, texts)
    monkeypatch.setattr(encode, "BATCH_DOCS", batch_docs)
    with EncodeWorkers(tiny_tokenizer, workers) as pool:
        got = list(encoded_batches(pool, iter(texts), lambda: float("inf")))
    assert np.array_equal(np.concatenate([flat for flat, _ in got]), want)
    assert [n for _, lens in got for n in lens] == want_lens
