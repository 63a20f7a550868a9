import numpy as np

from niels_gpt.curation.dedup import KEEP, SignatureFiles, deduplicate, doc_keys, exact_duplicates, token_keys
from niels_gpt.curation.minhash import EMPTY, candidate_pairs, estimate_jaccard
from niels_gpt.curation.minhash import band_keys as all_band_keys
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


def _reference_near(sig, skip, threshold):
    """The rule on whole signatures in memory: every band at once, estimates from whole rows."""
    keys = all_band_keys(sig, 32, 8)
    keys[skip] = 0
    pairs = candidate_pairs(keys)
    est = estimate_jaccard(sig[pairs[:, 0]], sig[pairs[:, 1]])
    removed = np.zeros(len(sig), dtype=bool)
    survivor = np.full(len(sig), -1)
    for (i, j), e in sorted(zip(pairs.tolist(), est.tolist()), key=lambda t: (t[0][1], t[0][0])):
        if e >= threshold and not removed[i] and not removed[j]:
            removed[j], survivor[j] = True, i
    return removed, survivor


def test_signature_files_band_by_band_decide_as_whole_signatures_in_memory(tiny_tokenizer, tmp_path):
    planted = planted_corpus(120, seed=3, copies_per_level=10)
    ids, starts = _encode(tiny_tokenizer, planted.texts)
    keys, sig = doc_keys(WordTable.from_tokenizer(tiny_tokenizer), ids, starts, shingle_words=5, num_bins=256)
    sig[5] = EMPTY  # a document without a shingle: never a candidate
    cut = len(sig) // 3
    with SignatureFiles(tmp_path, bands=32, rows=8) as files:
        files.append(sig[:cut])
        files.append(sig[cut:])
        files.done()
        assert len(files) == len(sig)
        assert (files.band(3) == sig[:, 24:32]).all()
        on_disk = deduplicate(keys, files, bands=32, rows=8, threshold=0.8, num_threads=2)
    in_memory = deduplicate(keys, sig, bands=32, rows=8, threshold=0.8)
    for a, b in zip(on_disk, in_memory):
        np.testing.assert_array_equal(a, b)
    exact, _ = exact_duplicates(keys)
    removed, survivor = _reference_near(sig, exact, 0.8)
    assert removed.any()
    assert (removed == (on_disk[0] == 2)).all()
    assert (survivor[removed] == on_disk[1][removed]).all()
    assert not list(tmp_path.iterdir())  # the band files are gone


def test_a_documents_keys_are_its_own_whatever_is_around_it(tiny_tokenizer):
    """Each document keyed in a batch (short ones, ones without a word, one not starting the chunk's first
    word) gets the keys it gets alone."""
    table = WordTable.from_tokenizer(tiny_tokenizer)
    texts = ["the cat sat", "...", "one two three four five six seven eight", "", "a", "x y z w v u"]
    ids, starts = _encode(tiny_tokenizer, texts)
    keys, sig = doc_keys(table, ids, starts, shingle_words=5, num_bins=64)
    bounds = np.append(starts, len(ids))
    for i in range(len(texts)):
        one = ids[bounds[i] : bounds[i + 1]]
        k, s = doc_keys(table, one, np.array([0]), shingle_words=5, num_bins=64)
        assert keys[i] == k[0] and (sig[i] == s[0]).all()
    assert keys[1] == 0 and keys[3] == 0 and len({int(x) for x in keys}) == 5
