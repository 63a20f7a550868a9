"""train_sentencepiece: the fixed id layout, training sentences, the vocabulary guards, determinism."""

from __future__ import annotations

import pytest

from niels_gpt.special_tokens import SPECIAL_TOKENS
from niels_gpt.tokenizer import train_sentencepiece
from niels_gpt.tokenizer.train import MAX_SENTENCE_CHARS, RESERVED_PIECES, training_sentences
from tests.support.corpus import tiny_corpus


def test_ids_are_unk_specials_newline_tab_bytes_then_learned_pieces(tiny_tokenizer):
    sp = tiny_tokenizer._sp
    assert sp.is_unknown(0) and tiny_tokenizer.id_to_piece(0) == "<unk>"
    assert [tiny_tokenizer.id_to_piece(i) for i in range(1, 5)] == list(SPECIAL_TOKENS.values())
    assert list(tiny_tokenizer.special_ids.values()) == [1, 2, 3, 4] and all(sp.is_control(i) for i in range(1, 5))
    assert [tiny_tokenizer.id_to_piece(i) for i in (5, 6)] == ["\n", "\t"]
    assert [tiny_tokenizer.id_to_piece(i) for i in range(7, 263)] == [f"<0x{b:02X}>" for b in range(256)]
    assert all(sp.is_byte(i) for i in range(7, 263)) and RESERVED_PIECES == 263
    learned = range(263, tiny_tokenizer.vocab_size)
    assert not any(sp.is_byte(i) or sp.is_control(i) or sp.is_unknown(i) for i in learned)
    assert sp.bos_id() == sp.eos_id() == sp.pad_id() == -1


def test_training_sentences_are_the_non_blank_lines_cut_to_the_trainer_limit():
    long_line = "x" * MAX_SENTENCE_CHARS + "y" * MAX_SENTENCE_CHARS + "z" * 5
    texts = ["first line\n\n   \nsecond\tline", long_line, "", "x" * MAX_SENTENCE_CHARS + "   "]
    assert list(training_sentences(texts)) == [
        "first line",
        "second\tline",
        "x" * MAX_SENTENCE_CHARS,
        "y" * MAX_SENTENCE_CHARS,
        "zzzzz",
        "x" * MAX_SENTENCE_CHARS,  # its blank 3-character tail is no sentence
    ]


def test_a_vocabulary_with_no_room_for_learned_pieces_is_refused(tmp_path):
    with pytest.raises(ValueError) as e:
        train_sentencepiece(tiny_corpus(10), tmp_path / "x.model", vocab_size=RESERVED_PIECES)
    assert str(e.value) == (
        "tokenizer.vocab_size=263 leaves no room for learned pieces (263 ids are reserved for <unk>, whitespace "
        "symbols and byte fallback)"
    )
    assert not list(tmp_path.iterdir())


def test_vocab_size_counts_ordinary_pieces_plus_specials(tiny_tokenizer):
    assert tiny_tokenizer.vocab_size == 400 + 4
    assert max(tiny_tokenizer.encode("anything at all 漢")) < tiny_tokenizer.vocab_size


def test_uint16_guard_refuses_oversized_vocabulary_before_writing(tmp_path):
    out = tmp_path / "big.model"
    with pytest.raises(ValueError, match=r"vocabulary of 70,004 pieces does not fit the uint16 cache format"):
        train_sentencepiece(tiny_corpus(10), out, vocab_size=70_000)
    assert not out.exists() and not list(tmp_path.iterdir())


def test_too_small_sample_gives_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match=r"^tokenizer.vocab_size=5,000 is more than the training sample supports"):
        train_sentencepiece(["tiny text only"], tmp_path / "x.model", vocab_size=5000)
    assert not list(tmp_path.iterdir())


def test_training_is_deterministic(tmp_path):
    a = train_sentencepiece(tiny_corpus(200), tmp_path / "a.model", vocab_size=350, num_threads=2)
    b = train_sentencepiece(tiny_corpus(200), tmp_path / "b.model", vocab_size=350, num_threads=2)
    assert a.sha256 == b.sha256
