"""uint16 token files, the one on-disk format of every token cache, and the one way to open them.

A token file is raw little-endian uint16 ids and nothing else: pretrain shards
(`{split}/shard_NNNNN.bin`) and SFT `{split}_tokens.bin`. Its length in tokens is its byte size / 2,
so an odd byte size means a damaged file. SFT offsets are int64 (`{split}_idx.npy`, np.save).
`open_tokens` maps a file read-only: slicing the map reads only the pages it touches, never the
whole file (random access: the datasets, `inspect`). `DiskSequence` streams files instead (whole
passes: `verify`, `info`, the report, the leakage audit): it reads with plain reads into arrays the
caller owns, so memory is what the caller asks for and pages read never stay resident, whatever the
files' size. Readers only ever see final names; `list_shards` ignores `*.tmp` files, which a running
or killed build leaves under their temporary name.

A `TokenFile` is a token file as readers see it: its path and, where a pretrain manifest says so
(shard_list.py), an id read in place of the file's last token (`last_id`: the eot that ends a budget-cut
document at a part boundary). It is path-like, and `open_tokens` and `DiskSequence` apply `last_id`, so the
file on disk stays as its part wrote it while every reader sees the same ids.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from niels_gpt.atomic import TMP_SUFFIX
from niels_gpt.layout import SHARD_GLOB

# uint16 is enough: every id < 2**16 is checked when the tokenizer is trained and again when loaded
TOKEN_DTYPE = np.dtype("<u2")
TOKEN_DTYPE_NAME = "uint16-le"
TOKEN_BYTES = TOKEN_DTYPE.itemsize
OFFSET_DTYPE = np.dtype("<i8")
OFFSET_DTYPE_NAME = "int64-le"
MAX_VOCAB = 1 << 16
BYTE_DTYPE = np.dtype("u1")  # the UTF-8 byte streams
READ_CHUNK_BYTES = 1 << 23  # DiskSequence.chunks: 8 MiB per read, flat memory, ~128 Python iterations per GB


@dataclass(frozen=True, kw_only=True)
class TokenFile:
    """A token file as readers see it: `path`, with `last_id` (when not None) read in place of its last token.
    Path-like (os.fspath gives the path), so it goes wherever a path does."""

    path: Path
    last_id: int | None = None

    def __fspath__(self) -> str:
        return os.fspath(self.path)


def last_id_of(path) -> int | None:
    """The id read in place of the last token of `path` (a TokenFile's `last_id`; None for a plain path)."""
    return path.last_id if isinstance(path, TokenFile) else None


def check_vocab_fits(vocab_size: int, *, what: str = "tokenizer") -> None:
    """Refuse a vocabulary whose ids do not fit in uint16."""
    if vocab_size > MAX_VOCAB:
        raise ValueError(
            f"{what}: vocabulary of {vocab_size:,} pieces does not fit the uint16 cache format "
            f"(every id must be < {MAX_VOCAB:,}); lower tokenizer.vocab_size"
        )


def pack_tokens(id_lists: Iterable[list[int]], *, end: int | None = None) -> np.ndarray:
    """Lists of Python int ids -> one TOKEN_DTYPE array: every non-empty list, followed by `end` if given.

    struct.pack per list converts ~1.5x faster than np.fromiter or np.array over the whole batch (measured
    in the encoding workers, where this conversion is the largest cost after sentencepiece itself); an id
    >= 2**16 raises struct.error.
    """
    tail = b"" if end is None else struct.pack("<H", end)
    data = b"".join(struct.pack(f"<{len(ids)}H", *ids) + tail for ids in id_lists if ids)
    return np.frombuffer(data, dtype=TOKEN_DTYPE)


def token_count(path: str | os.PathLike) -> int:
    """Tokens in a uint16 file, from its size alone (nothing is read)."""
    try:
        size = os.path.getsize(path)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{path}: token file not found; build the cache first (snakemake -j4 cache/all)"
        ) from None
    if size % TOKEN_BYTES:
        raise ValueError(
            f"{path}: {size:,} bytes is not a whole number of uint16 tokens; the file is damaged - rebuild the cache"
        )
    return size // TOKEN_BYTES


def open_tokens(path: str | os.PathLike) -> np.ndarray:
    """Read-only memory map of a uint16 token file (an empty file gives an empty array).

    A TokenFile with a `last_id` is mapped copy-on-write ("c") and its last id set in the map: the one page
    touched becomes private to this process, the file is never written."""
    n = token_count(path)
    if n == 0:
        return np.zeros(0, dtype=TOKEN_DTYPE)  # np.memmap cannot map an empty file
    last, path = last_id_of(path), os.fspath(path)
    if last is None:
        return np.memmap(path, dtype=TOKEN_DTYPE, mode="r", shape=(n,))
    tokens = np.memmap(path, dtype=TOKEN_DTYPE, mode="c", shape=(n,))
    tokens[-1] = last
    tokens.flags.writeable = False  # read-only to the caller, like every other map
    return tokens


def list_shards(split_dir: str | os.PathLike) -> list[Path]:
    """`shard_*.bin` files of a split directory in name order; temporary `*.tmp` files are ignored."""
    d = Path(split_dir)
    if not d.is_dir():
        raise NotADirectoryError(
            f"{d}: no such shard directory; build the cache first "
            "(`snakemake -j4 cache/all` or `python -m niels_gpt.cache.cli build-pretrain ...`)"
        )
    return sorted(p for p in d.glob(SHARD_GLOB) if not p.name.endswith(TMP_SUFFIX))


class DiskSequence:
    """Raw files of one dtype (the shards of a split, an SFT tokens file, a byte stream) read as one 1-d
    sequence, with plain reads into new arrays: nothing is memory-mapped, so the pages read never stay
    in the process's resident memory. Memory is what the caller asks for: `read(lo, hi)` allocates
    hi - lo items; `chunks()` yields the sequence in new arrays of at most `chunk_bytes`, so a caller
    that keeps no chunk holds at most two at a time (the one it works on and the one being read)."""

    def __init__(self, paths: Sequence[str | os.PathLike], dtype=TOKEN_DTYPE):
        self.paths = [Path(p) for p in paths]
        self.last_ids = [last_id_of(p) for p in paths]  # TokenFile.last_id: read in place of a file's last item
        self.dtype = np.dtype(dtype)
        if self.dtype not in (TOKEN_DTYPE, BYTE_DTYPE):
            raise ValueError(f"DiskSequence reads {TOKEN_DTYPE} token files or {BYTE_DTYPE} byte streams, not {dtype}")
        lengths = [token_count(p) if self.dtype == TOKEN_DTYPE else os.path.getsize(p) for p in self.paths]
        self.bounds = np.cumsum([0, *lengths])  # item position where each file starts; the total last

    def __len__(self) -> int:
        return int(self.bounds[-1])

    def read(self, lo: int, hi: int) -> np.ndarray:
        """A new array of the items at positions [lo, hi) (clipped to the sequence); it may span files."""
        lo, hi = max(lo, 0), min(hi, len(self))
        out = np.empty(max(hi - lo, 0), dtype=self.dtype)
        pos, i = lo, int(np.searchsorted(self.bounds, lo, side="right")) - 1
        while pos < hi:
            take = min(hi, int(self.bounds[i + 1])) - pos
            if take > 0:
                start = (pos - int(self.bounds[i])) * self.dtype.itemsize
                _read_exact(self.paths[i], start, memoryview(out[pos - lo : pos - lo + take]).cast("B"))
                pos += take
                if self.last_ids[i] is not None and pos == int(self.bounds[i + 1]):
                    out[pos - lo - 1] = self.last_ids[i]
            i += 1
        return out

    def chunks(self, chunk_bytes: int | None = None) -> Iterator[np.ndarray]:
        """The whole sequence in order, as new arrays of at most `chunk_bytes` (READ_CHUNK_BYTES); a chunk
        may span files."""
        step = max(1, (chunk_bytes or READ_CHUNK_BYTES) // self.dtype.itemsize)
        for lo in range(0, len(self), step):
            yield self.read(lo, lo + step)


def _read_exact(path: Path, offset: int, into: memoryview) -> None:
    with open(path, "rb", buffering=0) as f:
        f.seek(offset)
        done = 0
        while done < len(into):  # raw reads may return short
            got = f.readinto(into[done:])
            if not got:
                raise ValueError(f"{path}: shorter than when it was opened; a build is rewriting it - wait, then retry")
            done += got
