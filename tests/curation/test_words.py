import numpy as np

from niels_gpt.curation.words import WordTable, normalized_words, word_hash_of
from tests.support.corpus import tiny_corpus


def _hashes(table, tokenizer, text):
    words, _ = table.word_hashes(np.array(tokenizer.encode(text)), np.array([0]))
    return [int(w) for w in words]


def test_word_hashes_from_ids_equal_the_words_of_the_text(tiny_tokenizer):
    table = WordTable.from_tokenizer(tiny_tokenizer)
    for text in tiny_corpus(40, seed=3) + ["The  cat, sat.\nOn the MAT\tagain -- ok"]:
        assert _hashes(table, tiny_tokenizer, text) == [word_hash_of(w) for w in normalized_words(text)]


def test_characters_outside_the_vocabulary_hash_the_same_every_time(tiny_tokenizer):
    # byte-fallback bytes of a rare character are kept as themselves: consistent, not decoded
    table = WordTable.from_tokenizer(tiny_tokenizer)
    a = _hashes(table, tiny_tokenizer, "naïve café déjà vu")
    assert len(a) == 4 and a == _hashes(table, tiny_tokenizer, "Naïve  café, déjà vu.")


def test_case_punctuation_and_spacing_do_not_change_the_words(tiny_tokenizer):
    table = WordTable.from_tokenizer(tiny_tokenizer)
    assert _hashes(table, tiny_tokenizer, "The cat, sat!") == _hashes(table, tiny_tokenizer, "the  CAT sat")
    assert _hashes(table, tiny_tokenizer, "the cat sat") != _hashes(table, tiny_tokenizer, "the cat sad")


def test_a_word_hashes_the_same_however_the_tokenizer_cut_it():
    table = WordTable.from_pieces(["▁hel", "lo", "▁hello", "▁world", "<0x2C>"])
    one, _ = table.word_hashes(np.array([0, 1, 4, 3]), np.array([0]))
    two, _ = table.word_hashes(np.array([2, 3]), np.array([0]))
    assert one.tolist() == two.tolist() == [word_hash_of("hello"), word_hash_of("world")]


def test_no_word_crosses_a_document_start():
    table = WordTable.from_pieces(["▁ab", "cd"])
    words, first = table.word_hashes(np.array([0, 1, 1]), np.array([0, 2]))
    assert first.tolist() == [0, 2]
    assert words.tolist() == [word_hash_of("abcd"), word_hash_of("cd")]


def test_hashes_are_fixed_across_processes():
    # a salted hash() would differ per process; this value is part of the decisions' determinism
    assert word_hash_of("hello") == 0x7085CBB247033C85


def test_words_longer_than_the_16_bit_sort_hash_as_their_text():
    table = WordTable.from_pieces(["\u2581a", "b", "\u2581c"])
    for run in (3, 40_000):  # the long word takes the int64 sort
        ids = np.array([2] + [0] + [1] * run + [2, 1], dtype=np.uint16)
        hashes, first = table.word_hashes(ids, np.array([0]))
        assert first.tolist() == [0, 1, run + 2]
        assert hashes.tolist() == [word_hash_of("c"), word_hash_of("a" + "b" * run), word_hash_of("cb")]
