import numpy as np

from niels_gpt.curation.dedup import KEEP, deduplicate, doc_keys, exact_duplicates, token_keys
from niels_gpt.curation.words import WordTable
from tests.support.planted import planted_corpus, true_jaccard


def _encode(tokenizer, texts):
    enc = tokenizer.encode_batch(texts, num_threads=1)
    starts = np.cumsum([0] + [len(e) + 1 for e in enc])[:-1]
    ids = np.concatenate([np.append(e, tokenizer.eot_id) for e in enc]).astype(np.uint16)
    return ids, starts


def test_exact_duplicates_keep_the_first_copy_and_never_match_empty_documents():
    removed, survivor = exact_duplicates(np.array([7, 3, 7, 0, 0, 3, 7], dtype=np.uint64))
    assert removed.tolist() == [False, False, True, False, False, True, True]
    assert survivor.tolist() == [-1, -1, 0, -1, -1, 1, 0]


def test_exact_key_sees_through_case_and_punctuation_but_not_word_order(tiny_tokenizer):
    table = WordTable.from_tokenizer(tiny_tokenizer)
    ids, starts = _encode(tiny_tokenizer, ["The cat sat.", "the CAT, sat", "sat the cat", "..."])
    keys, _ = doc_keys(table, ids, starts, shingle_words=5, num_bins=256)
    assert keys[0] == keys[1] != keys[2] and keys[3] == 0


def test_token_keys_compare_whole_units():
    keys = token_keys(np.array([1, 2, 3, 1, 2, 3, 1, 2]), np.array([0, 3, 6]))
    assert keys[0] == keys[1] != keys[2]


def test_keys_do_not_depend_on_how_documents_are_chunked(tiny_tokenizer):
    table = WordTable.from_tokenizer(tiny_tokenizer)
    texts = planted_corpus(40, seed=1, copies_per_level=3).texts
    ids, starts = _encode(tiny_tokenizer, texts)
    whole = doc_keys(table, ids, starts, shingle_words=5, num_bins=256)
    cut = len(texts) // 2
    first = doc_keys(table, ids[: starts[cut]], starts[:cut], shingle_words=5, num_bins=256)
    second = doc_keys(table, ids[starts[cut] :], starts[cut:] - starts[cut], shingle_words=5, num_bins=256)
    assert (np.concatenate([first[0], second[0]]) == whole[0]).all()
    assert (np.concatenate([first[1], second[1]]) == whole[1]).all()


def test_planted_near_copies_found_and_no_removal_below_jaccard_0_7(tiny_tokenizer):
    planted = planted_corpus(200, seed=0, copies_per_level=20)
    ids, starts = _encode(tiny_tokenizer, planted.texts)
    keys, sig = doc_keys(WordTable.from_tokenizer(tiny_tokenizer), ids, starts, shingle_words=5, num_bins=256)
    reason, survivor, _ = deduplicate(keys, sig, bands=32, rows=8, threshold=0.8)
    removed = reason != KEEP
    high = [(a, b) for a, b, j in planted.pairs if j >= 0.85]
    assert len(high) >= 40
    assert sum(bool(removed[a] or removed[b]) for a, b in high) / len(high) >= 0.95
    for doc in np.flatnonzero(removed):
        kept = survivor[doc]
        assert not removed[kept] and kept < doc  # the earlier copy survives
        assert true_jaccard(planted.texts[doc], planted.texts[kept]) >= 0.7
