import numpy as np

from niels_gpt.curation.raw import doc_chunks, source_order, unit_chunks
from niels_gpt.token_files import DiskSequence

EOT = 4


def _seq(tmp_path, ids):
    path = tmp_path / "shard_00000.bin"
    np.asarray(ids, dtype="<u2").tofile(path)
    return DiskSequence([path])


def test_doc_chunks_never_split_a_document_and_keep_a_last_one_without_eot(tmp_path):
    ids = [9, 9, EOT, 7, 7, 7, 7, 7, 7, EOT, 5, EOT, 6, 6]  # the last document was cut by a budget: no eot
    seq = _seq(tmp_path, ids)
    for chunk in (2, 3, 5, 100):
        docs = [
            chunk_ids[a:b].tolist()
            for _, chunk_ids, starts in doc_chunks(seq, EOT, chunk)
            for a, b in zip(starts, np.append(starts[1:], len(chunk_ids)))
        ]
        assert docs == [[9, 9, EOT], [7] * 6 + [EOT], [5, EOT], [6, 6]], chunk


def test_unit_chunks_follow_the_offsets(tmp_path):
    seq = _seq(tmp_path, [1, 2, 3, 1, 2, 1, 2, 3, 4])
    offsets = np.array([0, 3, 5])
    for chunk in (1, 4, 100):
        got = [(lo, ids.tolist(), starts.tolist()) for lo, ids, starts in unit_chunks(seq, offsets, chunk)]
        units = [ids[a:b] for _, ids, starts in got for a, b in zip(starts, starts[1:] + [len(ids)])]
        assert units == [[1, 2, 3], [1, 2], [1, 2, 3, 4]], chunk


def test_source_priority_puts_the_named_sources_first():
    assert source_order("pretrain", None) == ["fineweb_edu", "wikitext", "gutenberg", "roam"]
    assert source_order("pretrain", ["roam", "wikitext", "primer"]) == ["roam", "wikitext", "fineweb_edu", "gutenberg"]
    assert source_order("sft", ["primer"]) == ["primer", "dolly15k", "oasst1"]
