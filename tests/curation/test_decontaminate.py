import numpy as np
import pytest

from niels_gpt.curation.decontaminate import covered, kept_pieces, protected_index, special_table, unit_ngrams
from niels_gpt.report.ngrams import rolling_hashes

EOT = 3
SPECIALS = special_table([EOT])


def test_a_protected_span_is_cut_out_and_the_rest_kept():
    val = np.array([50, 51, 52, 53, 54], dtype=np.uint16)
    index = protected_index([unit_ngrams(val, 3, SPECIALS)])
    doc = np.array([10, 11, 12, 13, 51, 52, 53, 20, 21, 22, 23], dtype=np.uint16)
    mask = covered(doc, index, 3, SPECIALS)
    assert mask.tolist() == [False] * 4 + [True] * 3 + [False] * 4
    assert kept_pieces(mask, 3) == [(0, 4), (7, 11)]
    assert kept_pieces(mask, 5) == []


def test_ngrams_holding_a_special_id_are_neither_protected_nor_matched():
    val = np.array([50, 51, EOT, 52, 53], dtype=np.uint16)
    assert len(unit_ngrams(val, 3, SPECIALS)) == 0
    index = protected_index([rolling_hashes(np.array([51, EOT, 52], dtype=np.uint16), 3)])
    assert not covered(np.array([51, EOT, 52], dtype=np.uint16), index, 3, SPECIALS).any()


def test_pieces_left_hold_no_protected_ngram():
    rng = np.random.default_rng(0)
    val = rng.integers(10, 40, 300, dtype=np.uint16)
    index = protected_index([unit_ngrams(val, 4, SPECIALS)])
    doc = rng.integers(10, 40, 3000, dtype=np.uint16)
    mask = covered(doc, index, 4, SPECIALS)
    assert mask.any()
    for a, b in kept_pieces(mask, 4):
        assert not index.contains(rolling_hashes(doc[a:b], 4)).any()


@pytest.mark.parametrize("seed", range(20))
def test_unit_pieces_are_kept_pieces_of_every_unit_at_once(seed):
    from niels_gpt.curation.decontaminate import unit_pieces

    rng = np.random.default_rng(seed)
    mask = rng.random(400) < rng.choice([0.05, 0.3, 0.7])
    cuts = np.sort(rng.choice(np.arange(1, 400), rng.integers(1, 30), replace=False))
    bounds = np.concatenate(([0], cuts, [400]))
    ranges = [(lo, hi - int(rng.random() < 0.7)) for lo, hi in zip(bounds[:-1], bounds[1:])]  # most end before the next
    chosen = [r for r in ranges if rng.random() < 0.6 and r[1] > r[0]]
    if not chosen:
        chosen = [ranges[0]]
    a = np.array([lo for lo, _ in chosen])
    b = np.array([hi for _, hi in chosen])
    for min_piece in (0, 1, 3, 13):
        unit, starts, ends = unit_pieces(mask, a, b, min_piece)
        got = [[] for _ in chosen]
        for j, s, e in zip(unit.tolist(), starts.tolist(), ends.tolist()):
            got[j].append((s, e))
        assert got == [kept_pieces(mask[lo:hi], min_piece) for lo, hi in chosen]


def test_an_index_less_its_waived_keys_answers_as_an_index_of_the_keys_left():
    rng = np.random.default_rng(7)
    keys = rng.integers(0, 2**63, 3000, dtype=np.int64).view(np.uint64)
    index = protected_index([keys])
    drop = rng.random(len(index)) < 0.3
    rest = protected_index([index.keys[~drop]])
    less = index.with_skip(drop)
    probe = np.concatenate([keys, index.keys[drop], rng.integers(0, 2**63, 3000, dtype=np.int64).view(np.uint64)])
    assert len(less) == len(rest) == len(index) - int(drop.sum()) and drop.any()
    np.testing.assert_array_equal(less.contains(probe), rest.contains(probe))
    ids = np.array([5, 9, 12, 9, 14] * 4, dtype=np.uint16)
    protected = protected_index([unit_ngrams(ids, 3, special_table([]))])
    mask = covered(ids, protected.with_skip(np.ones(len(protected), dtype=bool)), 3, special_table([]))
    assert (
        not mask.any() and covered(ids, protected.with_skip(np.zeros(len(protected), bool)), 3, special_table([])).all()
    )


@pytest.mark.parametrize("protect", [1, 5, 150])
def test_covered_marks_every_position_of_each_protected_ngram_few_or_many(protect):
    """Few matching n-grams (each marked position by position) or many (a running sum): the same rule."""
    rng = np.random.default_rng(protect)
    n = 4
    ids = rng.integers(4, 9, 300).astype(np.uint16)
    ids[rng.integers(0, 300, 6)] = EOT
    grams = [tuple(ids[i : i + n]) for i in range(len(ids) - n + 1) if EOT not in ids[i : i + n]]
    chosen = [grams[i] for i in rng.choice(len(grams), protect, replace=False)]
    index = protected_index([rolling_hashes(np.array(g, dtype=np.uint16), n) for g in chosen])
    want = np.zeros(len(ids), dtype=bool)
    for i in range(len(ids) - n + 1):
        if tuple(ids[i : i + n]) in set(chosen):
            want[i : i + n] = True
    np.testing.assert_array_equal(covered(ids, index, n, SPECIALS), want)
