import numpy as np

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
