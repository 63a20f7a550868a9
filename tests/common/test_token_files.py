"""token_files.py: the uint16 format, its checks, the memory map, and the one streaming reader (DiskSequence)."""

from __future__ import annotations

import struct
import tracemalloc

import numpy as np
import pytest

from niels_gpt import token_files
from niels_gpt.token_files import (
    BYTE_DTYPE,
    MAX_VOCAB,
    TOKEN_DTYPE,
    DiskSequence,
    TokenFile,
    check_vocab_fits,
    list_shards,
    open_tokens,
    pack_tokens,
    token_count,
)


def write(path, values, dtype=TOKEN_DTYPE):
    np.asarray(values, dtype=dtype).tofile(path)
    return path


def test_token_count_is_the_byte_size_over_two_and_an_odd_size_is_damage(tmp_path):
    assert token_count(write(tmp_path / "a.bin", range(7))) == 7
    (tmp_path / "odd.bin").write_bytes(b"\0\0\0")
    with pytest.raises(ValueError, match="3 bytes is not a whole number of uint16 tokens; the file is damaged"):
        token_count(tmp_path / "odd.bin")
    with pytest.raises(FileNotFoundError, match="token file not found; build the cache first"):
        token_count(tmp_path / "missing.bin")


def test_open_tokens_maps_read_only_and_an_empty_file_is_empty(tmp_path):
    tokens = open_tokens(write(tmp_path / "a.bin", [3, 1, 65535]))
    assert isinstance(tokens, np.memmap) and tokens.dtype == TOKEN_DTYPE and tokens.tolist() == [3, 1, 65535]
    with pytest.raises(ValueError):
        tokens[0] = 1
    (tmp_path / "empty.bin").write_bytes(b"")
    assert len(open_tokens(tmp_path / "empty.bin")) == 0


def test_list_shards_in_name_order_without_temporary_files(tmp_path):
    for name in ("shard_00001.bin", "shard_00000.bin", "shard_00002.bin.tmp", "notes.txt"):
        (tmp_path / name).write_bytes(b"")
    assert [p.name for p in list_shards(tmp_path)] == ["shard_00000.bin", "shard_00001.bin"]
    with pytest.raises(NotADirectoryError, match="no such shard directory; build the cache first"):
        list_shards(tmp_path / "train")


def test_pack_tokens_ends_every_non_empty_list_and_refuses_ids_past_uint16():
    packed = pack_tokens([[5, 6], [], [7]], end=2)
    assert packed.dtype == TOKEN_DTYPE and packed.tolist() == [5, 6, 2, 7, 2]
    assert pack_tokens([[1, 2]]).tolist() == [1, 2]
    with pytest.raises(struct.error):
        pack_tokens([[MAX_VOCAB]])


def test_check_vocab_fits_refuses_a_vocabulary_past_uint16():
    check_vocab_fits(MAX_VOCAB)
    with pytest.raises(ValueError, match="65,537 pieces does not fit the uint16 cache format"):
        check_vocab_fits(MAX_VOCAB + 1)


def test_disk_sequence_reads_files_as_one_sequence_across_their_boundaries(tmp_path):
    parts = [range(0, 5), range(5, 5), range(5, 12), range(12, 13)]  # an empty file in the middle
    seq = DiskSequence([write(tmp_path / f"{k}.bin", p) for k, p in enumerate(parts)])
    assert len(seq) == 13
    assert seq.read(3, 13).tolist() == list(range(3, 13)) and seq.read(5, 6).tolist() == [5]
    assert seq.read(11, 99).tolist() == [11, 12] and seq.read(-4, 2).tolist() == [0, 1]  # clipped
    assert seq.read(7, 7).tolist() == [] and seq.read(0, 13).dtype == TOKEN_DTYPE
    assert len(DiskSequence([])) == 0 and list(DiskSequence([]).chunks()) == []


@pytest.mark.parametrize("chunk_bytes", [1, 2, 6, 7, 1 << 20])
def test_chunks_cover_the_sequence_in_order_at_any_chunk_size(tmp_path, chunk_bytes):
    values = np.random.default_rng(0).integers(0, 1 << 16, size=101)
    seq = DiskSequence([write(tmp_path / "a.bin", values[:40]), write(tmp_path / "b.bin", values[40:])])
    chunks = list(seq.chunks(chunk_bytes))
    assert np.concatenate(chunks).tolist() == values.tolist()
    assert all(c.nbytes <= max(chunk_bytes, 2) for c in chunks)  # a chunk is at least one item


def test_chunks_default_to_read_chunk_bytes(tmp_path, monkeypatch):
    monkeypatch.setattr(token_files, "READ_CHUNK_BYTES", 8)
    seq = DiskSequence([write(tmp_path / "a.bin", range(10))])
    assert [len(c) for c in seq.chunks()] == [4, 4, 2]


def test_byte_streams_are_read_as_bytes(tmp_path):
    (tmp_path / "s.bin").write_bytes("héllo".encode())
    seq = DiskSequence([tmp_path / "s.bin"], BYTE_DTYPE)
    assert len(seq) == 6 and seq.read(0, 6).tobytes().decode() == "héllo"
    assert b"".join(c.tobytes() for c in seq.chunks(4)) == "héllo".encode()


def test_disk_sequence_refuses_damaged_files_and_other_dtypes(tmp_path):
    (tmp_path / "odd.bin").write_bytes(b"\0\0\0")
    with pytest.raises(ValueError, match="not a whole number of uint16 tokens"):
        DiskSequence([tmp_path / "odd.bin"])
    with pytest.raises(FileNotFoundError):
        DiskSequence([tmp_path / "missing.bin"])
    with pytest.raises(ValueError, match="reads uint16 token files or uint8 byte streams"):
        DiskSequence([tmp_path / "odd.bin"], np.float32)


def test_a_file_that_shrinks_while_read_is_an_error_not_short_data(tmp_path):
    path = write(tmp_path / "a.bin", range(10))
    seq = DiskSequence([path])
    write(path, range(4))
    with pytest.raises(ValueError, match="shorter than when it was opened"):
        seq.read(0, 10)


def test_read_gives_a_new_array_of_its_own_not_a_view_of_the_file(tmp_path):
    path = write(tmp_path / "a.bin", range(10))
    got = DiskSequence([path]).read(2, 6)
    assert type(got) is np.ndarray and got.flags.owndata and got.flags.writeable
    got[:] = 0
    assert np.fromfile(path, dtype=TOKEN_DTYPE).tolist() == list(range(10))


def test_streaming_a_file_holds_at_most_two_chunks_in_memory(tmp_path):
    """The memory claim: a pass over a file 32x the chunk size allocates no more than two chunks at once."""
    chunk = 1 << 18
    path = write(tmp_path / "big.bin", np.arange(16 * chunk) % 60000)  # 32 chunks of `chunk` bytes
    seq = DiskSequence([path])
    tracemalloc.start()
    try:
        total = sum(int(c[-1]) for c in seq.chunks(chunk))
        streamed = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        seq.read(0, len(seq))
        whole = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert total > 0
    assert streamed <= 2 * chunk + 64 * 1024  # two chunks and a little bookkeeping
    assert whole >= 32 * chunk  # what reading the file at once costs


def test_a_token_file_with_a_last_id_reads_it_in_place_of_its_last_token_and_the_file_stays(tmp_path):
    a, b = write(tmp_path / "a.bin", [5, 6, 7]), write(tmp_path / "b.bin", [8, 9])
    before = a.read_bytes()
    marked = TokenFile(path=a, last_id=4)
    tokens = open_tokens(marked)
    assert tokens.tolist() == [5, 6, 4] and not tokens.flags.writeable
    with pytest.raises(ValueError):
        tokens[0] = 1  # read-only to the caller, like a plain map
    assert open_tokens(a).tolist() == [5, 6, 7] and a.read_bytes() == before  # the file is not written
    seq = DiskSequence([marked, b])
    assert seq.read(0, 5).tolist() == [5, 6, 4, 8, 9]
    assert seq.read(1, 2).tolist() == [6] and seq.read(2, 4).tolist() == [4, 8]
    assert [c.tolist() for c in seq.chunks(chunk_bytes=4)] == [[5, 6], [4, 8], [9]]
    assert token_count(marked) == 3 and TokenFile(path=a).last_id is None
