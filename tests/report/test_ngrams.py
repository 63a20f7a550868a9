"""Rolling n-gram hashes, the val-side index and the chunked train scan, against plain Python definitions."""

from __future__ import annotations

import numpy as np
import pytest

from niels_gpt.report.ngrams import BASE, NgramIndex, rolling_hashes, scan_matches, sorted_unique, windows_touching
from niels_gpt.token_files import DiskSequence

MASK = (1 << 64) - 1


def python_hash(gram) -> int:
    h = 0
    for v in gram:
        h = (h * int(BASE) + int(v)) & MASK
    return h


@pytest.mark.parametrize("dtype, n", [(np.uint16, 13), (np.uint8, 50), (np.uint16, 1)])
def test_rolling_hash_is_the_polynomial_of_every_ngram(dtype, n):
    x = np.random.default_rng(0).integers(0, np.iinfo(dtype).max, size=n + 40, dtype=dtype)
    h = rolling_hashes(x, n)
    assert h.dtype == np.uint64 and len(h) == 41
    assert [int(v) for v in h] == [python_hash(x[i : i + n]) for i in range(41)]


def test_rolling_hash_is_the_polynomial_for_every_n_and_length_near_it():
    rng = np.random.default_rng(5)
    for n in range(1, 66):
        for extra in (0, 1, 2, n, 3 * n + 1):
            x = rng.integers(0, 65535, size=n + extra, dtype=np.uint16)
            assert [int(v) for v in rolling_hashes(x, n)] == [python_hash(x[i : i + n]) for i in range(extra + 1)], n


def test_sequences_shorter_than_n_have_no_ngrams():
    assert len(rolling_hashes(np.arange(12, dtype=np.uint16), 13)) == 0
    assert len(windows_touching(np.zeros(12, dtype=bool), 13)) == 0


def test_equal_ngrams_hash_equal_anywhere_and_a_changed_id_changes_the_hash():
    x = np.random.default_rng(1).integers(0, 16000, size=200, dtype=np.uint16)
    x[150:163] = x[20:33]
    h = rolling_hashes(x, 13)
    assert h[150] == h[20]
    y = x.copy()
    y[26] += 1
    assert rolling_hashes(y, 13)[20] != h[20]


def test_windows_touching_flags_every_window_holding_a_flag():
    flags = np.zeros(30, dtype=bool)
    flags[[4, 20]] = True
    got = windows_touching(flags, 5)
    assert list(got) == [bool(flags[i : i + 5].any()) for i in range(26)]


def test_index_lookup_returns_exactly_the_members():
    rng = np.random.default_rng(2)
    keys = rng.integers(0, 2**63, size=5000, dtype=np.uint64) * np.uint64(2)
    index, inverse = NgramIndex.from_hashes(np.concatenate([keys, keys[:100]]))
    assert len(index) == len(np.unique(keys))
    assert np.array_equal(index.keys[inverse], np.concatenate([keys, keys[:100]]))
    queries = np.concatenate([keys[::7], rng.integers(0, 2**63, size=20000, dtype=np.uint64) * np.uint64(2) + 1])
    found = index.keys[index.lookup(queries)]
    members = set(keys.tolist())
    assert sorted(found.tolist()) == sorted(q for q in queries.tolist() if q in members)


def test_empty_index_finds_nothing():
    index, _ = NgramIndex.from_hashes(np.zeros(0, dtype=np.uint64))
    assert len(index.lookup(np.arange(10, dtype=np.uint64))) == 0
    assert not scan_matches(np.arange(100, dtype=np.uint16), 3, index).any()


def test_index_refuses_unsorted_keys():
    with pytest.raises(ValueError, match="sorted and distinct"):
        NgramIndex(np.array([5, 3], dtype=np.uint64))


@pytest.mark.parametrize("chunk, threads", [(1, 1), (7, 2), (64, 2), (10_000, 1)])
def test_scan_finds_every_val_ngram_whatever_the_chunks_and_shard_boundaries(tmp_path, chunk, threads):
    rng = np.random.default_rng(3)
    n = 13
    val = rng.integers(5, 400, size=600, dtype=np.uint16)
    train = rng.integers(5, 400, size=3000, dtype=np.uint16)
    train[1000:1100] = val[200:300]  # copied: 88 of val's n-grams
    train[1995:2010] = val[0:15]  # crosses the shard boundary at 2000
    shards = [tmp_path / f"shard_{k}.bin" for k in range(3)]
    for path, part in zip(shards, (train[:2000], train[2000:2000], train[2000:])):
        part.tofile(path)
    index, inverse = NgramIndex.from_hashes(rolling_hashes(val, n))
    seen = scan_matches(DiskSequence(shards), n, index, chunk=chunk, num_threads=threads)
    assert np.array_equal(scan_matches(train, n, index, chunk=chunk, num_threads=threads), seen)  # an array in memory
    train_grams = {tuple(train[i : i + n]) for i in range(len(train) - n + 1)}
    expected = [tuple(val[i : i + n]) in train_grams for i in range(len(val) - n + 1)]
    assert seen[inverse].tolist() == expected
    assert sum(expected) == 88 + 3


def test_contains_agrees_with_a_python_set_members_or_not():
    from niels_gpt.report.ngrams import HashTable, NgramIndex

    rng = np.random.default_rng(3)
    keys = np.unique(np.concatenate([rng.integers(0, 2**63, 5000, dtype=np.uint64), np.array([0, 1, 2], np.uint64)]))
    index, _ = NgramIndex.from_hashes(keys)
    probe = np.concatenate([keys[::3], rng.integers(0, 2**63, 20000, dtype=np.uint64), np.array([0, 7], np.uint64)])
    want = np.array([int(h) in set(keys.tolist()) for h in probe])
    assert (index.contains(probe) == want).all()
    ids = index.key_ids(probe)
    assert (ids[want] >= 0).all() and (index.keys[ids[want]] == probe[want]).all() and (ids[~want] == -1).all()
    table = HashTable(np.arange(1, 3000, dtype=np.uint64) << np.uint64(40))  # every key at the same home bits
    assert table.contains(np.arange(0, 3001, dtype=np.uint64) << np.uint64(40)).tolist() == [False] + [True] * 2999 + [
        False
    ]


@pytest.mark.parametrize("dtype", [np.int64, np.uint64, np.uint16])
@pytest.mark.parametrize("size", [0, 1, 2, 1000])
def test_sorted_unique_is_np_unique(dtype, size):
    x = np.random.default_rng(size).integers(0, 50, size).astype(dtype)
    got = sorted_unique(x)
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got, np.unique(x))


@pytest.mark.parametrize("chunk", [5, 50, 5000])
def test_scan_of_text_that_repeats_its_matches_finds_each_key(chunk):
    """Train text made of val passages over and over (the scan drops seen keys from its filters as it goes):
    every val n-gram found, and none that the text does not hold."""
    rng = np.random.default_rng(chunk)
    n = 4
    val = rng.integers(5, 60, size=400, dtype=np.uint16)
    pieces = [val[a : a + int(rng.integers(n, 40))] for a in rng.integers(0, 300, 300)]
    train = np.concatenate(pieces + [rng.integers(60, 90, size=50, dtype=np.uint16)])
    index, inverse = NgramIndex.from_hashes(rolling_hashes(val, n))
    seen = scan_matches(train, n, index, chunk=chunk, num_threads=2)
    train_grams = {tuple(train[i : i + n]) for i in range(len(train) - n + 1)}
    assert seen[inverse].tolist() == [tuple(val[i : i + n]) in train_grams for i in range(len(val) - n + 1)]
    rest = NgramIndex(index.keys).without(seen)  # filters over the keys not seen: each of them still found
    assert np.array_equal(rest.lookup(index.keys[~seen]), np.flatnonzero(~seen)) and (~seen).any()
