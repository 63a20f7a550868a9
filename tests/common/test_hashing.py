"""niels_gpt.hashing: a file's sha256 read in fixed chunks, and the sha256 of canonical JSON."""

from __future__ import annotations

import hashlib
import io
import os

import pytest

from niels_gpt import hashing
from niels_gpt.hashing import sha256_file, sha256_json


@pytest.mark.parametrize("size", [0, 1, 9, 10, 11, 1000])
def test_sha256_file_is_the_digest_of_the_whole_file_across_chunk_boundaries(tmp_path, monkeypatch, size):
    monkeypatch.setattr(hashing, "HASH_CHUNK_BYTES", 10)
    data = os.urandom(size)
    (tmp_path / "f.bin").write_bytes(data)
    assert sha256_file(tmp_path / "f.bin") == hashlib.sha256(data).hexdigest()
    assert sha256_file(str(tmp_path / "f.bin")) == hashlib.sha256(data).hexdigest()


def test_a_file_is_read_in_chunks_of_at_most_hash_chunk_bytes(tmp_path, monkeypatch):
    (tmp_path / "f.bin").write_bytes(b"x" * (2 * hashing.HASH_CHUNK_BYTES + 5))
    reads = []

    class Recording(io.FileIO):
        def read(self, size=-1):
            reads.append(size)
            return super().read(size)

    monkeypatch.setattr(hashing, "open", lambda path, mode: Recording(path, "r"), raising=False)
    sha256_file(tmp_path / "f.bin")
    assert reads == [hashing.HASH_CHUNK_BYTES] * 4  # three chunks and the empty read at the end


def test_sha256_json_is_the_digest_of_sorted_compact_json():
    assert sha256_json({"b": 1, "a": [1, 2]}) == hashlib.sha256(b'{"a":[1,2],"b":1}').hexdigest()
    assert sha256_json({"a": [1, 2], "b": 1}) == sha256_json({"b": 1, "a": [1, 2]})  # key order does not count
    assert sha256_json({"a": [2, 1], "b": 1}) != sha256_json({"a": [1, 2], "b": 1})  # list order does
