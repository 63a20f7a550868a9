"""SentencePieceTokenizer: lossless round trips, injection-proof special tokens, bytes per piece, a model
without control specials refused, pickled with its model."""

from __future__ import annotations

import numpy as np
import pytest

from niels_gpt.special_tokens import SPECIAL_TOKENS
from niels_gpt.tokenizer import SentencePieceTokenizer
from tests.support.corpus import tiny_corpus


@pytest.mark.parametrize(
    "text",
    [
        "Plain words the river.",
        "  leading spaces, trailing  \n\n\ttabs\tand\nnewlines\n",
        "def f(x):\n    return x  # indented code\n",
        "unseen: 漢字 ß émoji 🙂 Ω ∑ \u00a0nbsp",
        "",
        "\n",
    ],
)
def test_decode_encode_round_trips_exactly(tiny_tokenizer, text):
    assert tiny_tokenizer.decode(tiny_tokenizer.encode(text)) == text


def test_piece_bytes_sum_to_the_decoded_length(tiny_tokenizer):
    sizes = tiny_tokenizer.piece_bytes()
    assert len(sizes) == tiny_tokenizer.vocab_size
    assert all(sizes[i] == 0 for i in tiny_tokenizer.special_ids.values())
    text = "  Tabs\tand\nnewlines, unseen 漢字 ß 🙂 and plain words the river.\n"
    ids = tiny_tokenizer.encode(text)
    assert sum(sizes[i] for i in ids) == len(text.encode("utf-8"))
    with_specials = [tiny_tokenizer.usr_id, *ids, tiny_tokenizer.eot_id]
    assert sum(sizes[i] for i in with_specials) == len(tiny_tokenizer.decode(with_specials).encode("utf-8"))


def test_special_strings_in_text_encode_to_ordinary_pieces_only(tiny_tokenizer):
    specials = set(tiny_tokenizer.special_ids.values())
    for name, literal in SPECIAL_TOKENS.items():
        text = f"before {literal} after{literal}"
        ids = tiny_tokenizer.encode(text)
        assert not specials & set(ids), name
        assert tiny_tokenizer.decode(ids) == text


def test_special_ids_are_named_and_distinct(tiny_tokenizer):
    ids = tiny_tokenizer.special_ids
    assert set(ids) == {"sys", "usr", "asst", "eot"}
    assert len(set(ids.values())) == 4
    named = (tiny_tokenizer.sys_id, tiny_tokenizer.usr_id, tiny_tokenizer.asst_id, tiny_tokenizer.eot_id)
    assert named == (ids["sys"], ids["usr"], ids["asst"], ids["eot"])
    assert tiny_tokenizer.decode_with_specials([ids["eot"]]) == SPECIAL_TOKENS["eot"]


def test_specials_decode_to_nothing_or_to_their_literal_or_short_names(tiny_tokenizer):
    tok = tiny_tokenizer
    ids = [tok.sys_id, *tok.encode("be brief"), tok.usr_id, *tok.encode("hi\n"), tok.asst_id, tok.eot_id]
    assert tok.decode(ids) == "be briefhi\n"
    assert tok.decode_with_specials(ids, short_names=True) == "<|sys|>be brief<|usr|>hi\n<|asst|><|eot|>"
    literal = SPECIAL_TOKENS["sys"] + "be brief" + SPECIAL_TOKENS["usr"] + "hi\n" + SPECIAL_TOKENS["asst"]
    assert tok.decode_with_specials(ids) == literal + SPECIAL_TOKENS["eot"]


def test_encode_batch_is_encode_of_each_text_in_order(tiny_tokenizer):
    texts = tiny_corpus(30, seed=2) + ["", "\n\t"]
    want = [tiny_tokenizer.encode(t) for t in texts]
    assert tiny_tokenizer.encode_batch(texts, num_threads=2) == want == tiny_tokenizer.encode_batch(texts)


class ListsOnly:
    """A sentencepiece without numpy output: only `encode`, returning lists."""

    def __init__(self, sp):
        self.encode = sp.encode


@pytest.mark.parametrize("numpy_output", [True, False])
def test_encode_batch_arrays_are_the_id_lists_as_int32(tiny_tokenizer, monkeypatch, numpy_output):
    texts = tiny_corpus(30, seed=2) + ["", "\n\t", "é ✓ \u3000"]
    if not numpy_output:
        monkeypatch.setattr(tiny_tokenizer, "_sp", ListsOnly(tiny_tokenizer._sp))
    arrays = tiny_tokenizer.encode_batch_arrays(texts, num_threads=1)
    assert all(a.dtype == np.int32 for a in arrays)
    assert [a.tolist() for a in arrays] == [tiny_tokenizer.encode(t) for t in texts]


def test_model_without_control_specials_is_refused(tmp_path):
    import sentencepiece as spm

    path = tmp_path / "plain.model"
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(tiny_corpus(100)), model_prefix=str(tmp_path / "plain"), vocab_size=150, minloglevel=2
    )
    with pytest.raises(ValueError, match="control symbol"):
        SentencePieceTokenizer(path)


def test_missing_model_names_the_path_and_the_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nope.model: tokenizer model not found; build it with `snakemake"):
        SentencePieceTokenizer(tmp_path / "nope.model")


def test_a_pickled_tokenizer_carries_its_model_not_just_the_path(tiny_tokenizer_path, tmp_path):
    import pickle
    import shutil

    path = tmp_path / "spm.model"
    shutil.copy(tiny_tokenizer_path, path)
    tok = SentencePieceTokenizer(path)
    data = pickle.dumps(tok)
    path.unlink()  # a worker process encodes with the model it was sent, whatever happens to the file
    copy = pickle.loads(data)
    text = "The river walks north of the stone.\n\tdef return"
    assert copy.sha256 == tok.sha256 and copy.special_ids == tok.special_ids and copy.model_path == str(path)
    assert copy.encode(text) == tok.encode(text)
