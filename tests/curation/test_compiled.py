"""The compiled passes give the numpy definitions' values, bit for bit."""

import numpy as np
import pytest

from niels_gpt.curation.compiled import CompiledIndex
from niels_gpt.curation.decontaminate import special_table
from niels_gpt.curation.dedup import doc_keys, doc_keys_reference, near_duplicates
from niels_gpt.curation.minhash import EMPTY, _band_seed, band_key, band_pairs, estimate_jaccard
from niels_gpt.curation.words import WordTable, mix64
from niels_gpt.report.ngrams import NgramIndex, rolling_hashes, sorted_unique, windows_touching


def _random_documents(rng, vocab: int, specials: list[int]):
    length = int(rng.integers(1, 400))
    ids = rng.integers(0, vocab, length).astype(np.uint16)
    ids[rng.integers(0, length, 4)] = rng.choice(specials, 4)  # role ids and eots inside documents
    starts = sorted_unique(np.concatenate(([0], rng.integers(0, length, int(rng.integers(0, 8)))))).astype(np.int64)
    return ids, starts


@pytest.mark.parametrize("shingle_words,num_bins", [(5, 256), (3, 64), (1, 16)])
def test_doc_keys_equal_the_numpy_definition(tiny_tokenizer, shingle_words, num_bins):
    table = WordTable.from_tokenizer(tiny_tokenizer)
    specials = sorted(tiny_tokenizer.special_ids.values())
    rng = np.random.default_rng(shingle_words)
    for _ in range(60):  # documents of 0 words, fewer words than a shingle, many; words split across pieces
        ids, starts = _random_documents(rng, tiny_tokenizer.vocab_size, specials)
        got = doc_keys(table, ids, starts, shingle_words=shingle_words, num_bins=num_bins)
        want = doc_keys_reference(table, ids, starts, shingle_words=shingle_words, num_bins=num_bins)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def test_doc_keys_of_text_documents_equal_the_numpy_definition(tiny_tokenizer):
    texts = ["The cat sat on the mat.", "", "Hi", "one two three four five six seven", "  ...  ", "É café, naïve!"]
    enc = [np.append(tiny_tokenizer.encode(t), tiny_tokenizer.eot_id) for t in texts]
    ids = np.concatenate(enc).astype(np.uint16)
    starts = np.cumsum([0] + [len(e) for e in enc])[:-1]
    table = WordTable.from_tokenizer(tiny_tokenizer)
    got = doc_keys(table, ids, starts, shingle_words=5, num_bins=256)
    want = doc_keys_reference(table, ids, starts, shingle_words=5, num_bins=256)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert got[0][1] == 0 and got[0][4] == 0  # no word: key 0


def _numpy_key_ids(index: NgramIndex, ids, n, specials, skip=None):
    h = rolling_hashes(ids, n)
    if not len(h):
        return np.zeros(0, dtype=np.int64)
    key = index.key_ids(h)
    key[windows_touching(specials[ids], n)] = -1
    if skip is not None:
        key[(key >= 0) & skip[np.maximum(key, 0)]] = -1
    return key


@pytest.mark.parametrize("n", [1, 2, 3, 13])
def test_ngram_key_ids_equal_hashes_then_lookups(n):
    rng = np.random.default_rng(n)
    ids = rng.integers(0, 12, 5000).astype(np.uint16)  # a small alphabet: many members
    ids[rng.integers(0, len(ids), 50)] = 0
    specials = special_table([0])
    index = NgramIndex(sorted_unique(rolling_hashes(ids[:2000], n)))
    compiled = CompiledIndex(index)
    np.testing.assert_array_equal(compiled.ngram_key_ids(ids, n, specials), _numpy_key_ids(index, ids, n, specials))
    skip = rng.random(len(index)) < 0.3
    np.testing.assert_array_equal(
        compiled.with_skip(skip).ngram_key_ids(ids, n, specials), _numpy_key_ids(index, ids, n, specials, skip)
    )
    assert len(compiled.with_skip(skip)) == len(index) - int(skip.sum())
    for short in (ids[: n - 1], ids[:0]):
        assert len(compiled.ngram_key_ids(short, n, specials)) == 0


def test_hash_lookups_equal_the_numpy_index_including_the_zero_key():
    rng = np.random.default_rng(0)
    keys = sorted_unique(
        np.concatenate((np.zeros(1, np.uint64), rng.integers(0, 2**63, 3000, dtype=np.int64).astype(np.uint64)))
    )
    index = NgramIndex(keys)
    probe = np.concatenate(
        (keys, rng.integers(0, 2**63, 3000, dtype=np.int64).astype(np.uint64), np.zeros(2, np.uint64))
    )
    rng.shuffle(probe)
    np.testing.assert_array_equal(CompiledIndex(index).key_ids(probe), index.key_ids(probe))
    assert (CompiledIndex(NgramIndex(keys[:0])).key_ids(probe) == -1).all()


def test_band_keys_follow_their_definition():
    rng = np.random.default_rng(3)
    band = rng.integers(0, 2**32, (40, 8), dtype=np.uint64).astype(np.uint32)
    band[5] = EMPTY  # no key
    band[6, :7] = EMPTY  # one bin filled: a key
    got = band_key(band, 7)
    for i, row in enumerate(band):
        h = np.array([_band_seed(7)], dtype=np.uint64)
        for v in row:
            h = mix64(h ^ np.uint64(v))
        want = 0 if (row == EMPTY).all() else max(int(h[0]), 1)
        assert int(got[i]) == want


def test_near_duplicate_estimates_are_the_signatures_jaccard_estimates():
    rng = np.random.default_rng(4)
    base = rng.integers(0, 2**32 - 1, 64, dtype=np.uint64).astype(np.uint32)
    sig = np.tile(base, (12, 1))
    for i in range(1, 12):  # copies with i bins changed and some emptied
        sig[i, rng.choice(64, i, replace=False)] = rng.integers(0, 2**32 - 1, i, dtype=np.uint64).astype(np.uint32)
        sig[i, rng.choice(64, i // 3, replace=False)] = EMPTY
    removed, survivor, similarity = near_duplicates(sig, np.zeros(12, bool), bands=16, rows=4, threshold=0.5)
    for j in np.flatnonzero(removed):
        assert similarity[j] == estimate_jaccard(sig[survivor[j]], sig[j])
    assert removed[1] and survivor[1] == 0


@pytest.mark.parametrize("seed", range(4))
def test_band_pairs_pair_each_document_with_the_first_and_the_previous_holder_of_its_key(seed):
    rng = np.random.default_rng(seed)
    col = rng.integers(0, 30, 500).astype(np.uint64)  # 0: no key
    want, first, last = set(), {}, {}
    for i, k in enumerate(col.tolist()):
        if k:
            if k in first:
                want |= {(first[k], i), (last[k], i)}
            first.setdefault(k, i)
            last[k] = i
    got = np.concatenate(band_pairs(col) or [np.zeros((0, 2), np.int64)])
    assert set(map(tuple, got.tolist())) == want and len(got) == len(want)
    assert band_pairs(np.zeros(9, np.uint64)) == [] and band_pairs(np.arange(1, 9, dtype=np.uint64)) == []
