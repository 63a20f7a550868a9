"""The tokenizer: lossless, injection-proof special tokens, uint16 guard, deterministic training."""

from __future__ import annotations

import pytest

from niels_gpt.special_tokens import SPECIAL_TOKENS
from niels_gpt.tokenizer import SentencePieceTokenizer, train_sentencepiece
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
    assert tiny_tokenizer.eot_id == ids["eot"] and tiny_tokenizer.asst_id == ids["asst"]
    assert tiny_tokenizer.decode_with_specials([ids["eot"]]) == SPECIAL_TOKENS["eot"]


def test_vocab_size_counts_ordinary_pieces_plus_specials(tiny_tokenizer):
    assert tiny_tokenizer.vocab_size == 400 + 4
    assert max(tiny_tokenizer.encode("anything at all 漢")) < tiny_tokenizer.vocab_size


def test_uint16_guard_refuses_oversized_vocabulary_before_writing(tmp_path):
    out = tmp_path / "big.model"
    with pytest.raises(ValueError, match=r"vocabulary of 70,004 pieces does not fit the uint16 cache format"):
        train_sentencepiece(tiny_corpus(10), out, vocab_size=70_000)
    assert not out.exists() and not list(tmp_path.iterdir())


def test_too_small_sample_gives_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="tokenizer.vocab_size"):
        train_sentencepiece(["tiny text only"], tmp_path / "x.model", vocab_size=5000)


def test_training_is_deterministic(tmp_path):
    a = train_sentencepiece(tiny_corpus(200), tmp_path / "a.model", vocab_size=350, num_threads=2)
    b = train_sentencepiece(tiny_corpus(200), tmp_path / "b.model", vocab_size=350, num_threads=2)
    assert a.sha256 == b.sha256


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
