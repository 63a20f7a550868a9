"""Streaming scans (scan.py) are exact whatever the chunk size."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from niels_gpt import token_files
from niels_gpt.inspection.scan import scan_bytes, scan_tokens


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
