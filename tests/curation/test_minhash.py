import numpy as np

from niels_gpt.curation.minhash import (
    EMPTY,
    band_keys,
    candidate_pairs,
    estimate_jaccard,
    exact_jaccard,
    shingle_hashes,
    signatures,
    word_shingles,
)


def _sig(word_lists, bins=256, k=5):
    words = np.concatenate([np.asarray(w, dtype=np.uint64) for w in word_lists])
    doc = np.concatenate([np.full(len(w), i) for i, w in enumerate(word_lists)])
    grams, gram_doc = shingle_hashes(words, doc, len(word_lists), k)
    return signatures(grams, gram_doc, len(word_lists), bins)


def test_shingles_never_cross_documents_and_short_documents_get_one():
    grams, doc = shingle_hashes(np.arange(1, 10, dtype=np.uint64), np.array([0] * 6 + [1] * 3), 2, 5)
    assert np.bincount(doc).tolist() == [2, 1]  # 6 words: 2 shingles; 3 words: the whole sequence


def test_estimate_is_near_exact_for_short_documents_and_close_for_long_ones():
    rng = np.random.default_rng(0)
    a = rng.integers(1, 1 << 40, 40).tolist()
    b = a[:30] + rng.integers(1, 1 << 40, 10).tolist()
    sig = _sig([a, b])
    truth = exact_jaccard(word_shingles(a), word_shingles(b))
    assert abs(estimate_jaccard(sig[0], sig[1]) - truth) < 0.05
    long_a = rng.integers(1, 1 << 40, 5000).tolist()
    long_b = list(long_a)
    for pos in rng.choice(5000, 60, replace=False):
        long_b[pos] = 7
    sig = _sig([long_a, long_b])
    truth = exact_jaccard(word_shingles(long_a), word_shingles(long_b))
    assert abs(estimate_jaccard(sig[0], sig[1]) - truth) < 4 * np.sqrt(truth * (1 - truth) / 256)


def test_identical_documents_share_every_band_and_empty_bands_match_nothing():
    sig = _sig([[1, 2, 3, 4, 5, 6, 7], [1, 2, 3, 4, 5, 6, 7], [9, 8]])
    keys = band_keys(sig, 32, 8)
    assert (keys[0] == keys[1]).all() and (keys[0] != 0).any()
    assert (keys[2] == 0).sum() >= 31  # one shingle fills one bin: one band
    assert (sig[2] != EMPTY).sum() == 1


def test_candidate_pairs_link_each_copy_to_the_first_and_its_predecessor():
    keys = np.array([[5, 0], [5, 0], [5, 1], [0, 1], [7, 0]], dtype=np.uint64)
    pairs = candidate_pairs(keys)
    assert pairs.tolist() == [[0, 1], [0, 2], [1, 2], [2, 3]]


def test_shingles_of_many_documents_are_each_ones_own_in_order():
    """Short documents (fewer than k words, one shingle each) and empty ones among long ones: the shingles of
    a batch are every document's own, document by document."""
    rng = np.random.default_rng(4)
    lengths = [0, 3, 9, 1, 0, 4, 5, 12, 2, 0, 7, 1]
    words = [rng.integers(1, 1 << 50, n).astype(np.uint64) for n in lengths]
    doc = np.concatenate([np.full(n, i) for i, n in enumerate(lengths)])
    grams, gram_doc = shingle_hashes(np.concatenate(words), doc, len(lengths), 5)
    assert np.all(np.diff(gram_doc) >= 0)
    for i, w in enumerate(words):
        alone, _ = shingle_hashes(w, np.zeros(len(w), dtype=np.int64), 1, 5)
        np.testing.assert_array_equal(grams[gram_doc == i], alone)
        assert len(alone) == (0 if not len(w) else max(1, len(w) - 4))
