"""Streaming scans (scan.py) are exact whatever the chunk size."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from niels_gpt import token_files
from niels_gpt.inspection.scan import example_blocks, example_lengths, scan_bytes, scan_tokens


@pytest.mark.parametrize("chunk_bytes", [4, 6, 1 << 20])
def test_scan_is_exact_across_chunk_boundaries(tmp_path, monkeypatch, chunk_bytes):
    monkeypatch.setattr(token_files, "READ_CHUNK_BYTES", chunk_bytes)
    eot = 4
    tokens = np.array([4, 9, 9, 4, 4, 7, 4, 4, 4, 8, 500, 3, 4], dtype="<u2")  # starts with eot: empty doc
    path = tmp_path / "t.bin"
    tokens.tofile(path)
    s = scan_tokens(path, vocab_size=400, eot_id=eot, sample_frac=1.0)
    assert s.sha256 == hashlib.sha256(tokens.tobytes()).hexdigest()
    assert (s.n_tokens, s.max_id, s.first_out_of_vocab, s.last_token) == (13, 500, 10, 4)
    is_eot = tokens == eot
    assert s.n_eot == is_eot.sum() == 7
    assert s.n_double_eot == int(is_eot[0]) + int((is_eot[1:] & is_eot[:-1]).sum()) == 4
    assert (s.id_counts[:501] == np.bincount(tokens, minlength=501)).all()
    assert scan_tokens(path, eot_id=eot, after_eot=False, hash=False).n_double_eot == 3  # continues a split
    text = "ab✓cd".encode()  # the 3-byte character straddles small chunks
    (tmp_path / "s.bin").write_bytes(text)
    b = scan_bytes(tmp_path / "s.bin")
    assert b.utf8_error is None and b.sha256 == hashlib.sha256(text).hexdigest()
    (tmp_path / "s.bin").write_bytes(text[:-3])
    assert "truncated UTF-8" in scan_bytes(tmp_path / "s.bin").utf8_error


def test_progress_counts_every_byte_read(tmp_path, monkeypatch):
    monkeypatch.setattr(token_files, "READ_CHUNK_BYTES", 6)
    np.arange(11, dtype="<u2").tofile(tmp_path / "t.bin")
    (tmp_path / "s.bin").write_bytes(b"0123456789abc")
    seen = []
    scan_tokens(tmp_path / "t.bin", on_bytes=seen.append)
    assert seen == [6, 6, 6, 4]
    seen.clear()
    scan_bytes(tmp_path / "s.bin", on_bytes=seen.append)
    assert seen == [6, 6, 1]


def test_example_blocks_are_runs_of_whole_examples_covering_the_file():
    offsets = np.array([0, 3, 4, 20, 22, 30])
    n_tokens = 33
    blocks = list(example_blocks(offsets, n_tokens, block_tokens=5))
    assert [(lo, hi, starts.tolist()) for lo, hi, starts in blocks] == [
        (0, 20, [0, 3, 4]),  # whole examples up to about 5 tokens: the third starts at 4
        (20, 30, [0, 2]),
        (30, 33, [0]),
    ]
    for block_tokens in (1, 2, 7, 100):  # whatever the block size: whole examples, each once, in order
        blocks = list(example_blocks(offsets, n_tokens, block_tokens=block_tokens))
        assert [lo for lo, _, _ in blocks] + [n_tokens] == [blocks[0][0]] + [hi for _, hi, _ in blocks]
        assert np.concatenate([starts + lo for lo, _, starts in blocks]).tolist() == offsets.tolist()
    assert [(lo, hi) for lo, hi, _ in example_blocks(offsets, n_tokens, block_tokens=100)] == [(0, 33)]
    assert example_lengths(offsets, n_tokens).tolist() == [3, 1, 16, 2, 8, 3]
    assert example_lengths(np.zeros(0, dtype=np.int64), 0).tolist() == []
