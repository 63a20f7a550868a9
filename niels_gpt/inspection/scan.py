"""Streaming passes over cache files for `verify` and `info`: hash, id range, eot statistics.

Every pass reads a file chunk by chunk (`token_files.DiskSequence`), so memory stays flat whatever the
file size (a multi-GB shard is never loaded at once). `scan_tokens` does, in one read, what verify
and info need from a uint16 token file (token_files.py): sha256, the largest id and where an id first
reaches the vocabulary size, eot counts (documents) and double eots (empty documents), and id counts
on an evenly spread sample (vocab coverage). `scan_bytes` hashes a byte stream and checks its UTF-8.
`example_blocks` cuts an SFT file into runs of whole examples so per-example work stays bounded.
"""

from __future__ import annotations

import codecs
import hashlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from niels_gpt.token_files import BYTE_DTYPE, TOKEN_DTYPE, DiskSequence, last_id_of, token_count

EXAMPLE_BLOCK_TOKENS = 1 << 22  # SFT work per block of whole examples: bounds the mask to ~4 MB


@dataclass
class TokenScan:
    """What one pass over a uint16 token file found (counts over the whole file)."""

    n_tokens: int = 0
    sha256: str | None = None  # None when hashing was skipped (verify --quick)
    max_id: int = -1
    first_out_of_vocab: int | None = None  # token position of the first id >= vocab_size
    n_eot: int = 0
    n_double_eot: int = 0  # eot at the start of the split or right after an eot: an empty document
    last_token: int | None = None
    id_counts: np.ndarray | None = field(default=None, repr=False)  # bincount of the sample
    n_sampled: int = 0


def _chunks(path: str | os.PathLike, dtype, on_bytes: Callable[[int], object] | None) -> Iterator[np.ndarray]:
    for chunk in DiskSequence([path], dtype).chunks():
        if on_bytes is not None:
            on_bytes(chunk.nbytes)
        yield chunk


def scan_tokens(
    path: str | os.PathLike,
    *,
    hash: bool = True,
    vocab_size: int | None = None,
    eot_id: int | None = None,
    after_eot: bool = True,
    sample_frac: float = 0.0,
    id_counts: np.ndarray | None = None,
    on_bytes: Callable[[int], object] | None = None,
) -> TokenScan:
    """One pass over a uint16 file (its byte size must be even; callers check that first).

    `after_eot`: was the token before this file an eot (True at the start of a split; pass the previous
    shard's `last_token == eot` to continue a split). `sample_frac` of every chunk's tokens (its head)
    are bincounted into `id_counts` (allocated if None), so the sample spreads evenly over the file.
    A TokenFile with a `last_id` (a manifest's end_eot) is hashed as it is on disk and counted as readers
    see it.
    """
    scan = TokenScan()
    last_id, total = last_id_of(path), token_count(path)
    path = os.fspath(path)
    h = hashlib.sha256() if hash else None
    if sample_frac > 0 and id_counts is None:
        id_counts = np.zeros(max(vocab_size or 0, 1 << 16), dtype=np.int64)
    for chunk in _chunks(path, TOKEN_DTYPE, on_bytes):
        if h is not None:
            h.update(chunk)
        if last_id is not None and scan.n_tokens + len(chunk) == total:
            chunk[-1] = last_id  # a new array (DiskSequence): the file is not touched
        top = int(chunk.max())
        if vocab_size is not None and top >= vocab_size and scan.first_out_of_vocab is None:
            scan.first_out_of_vocab = scan.n_tokens + int(np.argmax(chunk >= vocab_size))
        scan.max_id = max(scan.max_id, top)
        if eot_id is not None:
            is_eot = chunk == eot_id
            scan.n_eot += int(np.count_nonzero(is_eot))
            scan.n_double_eot += int(np.count_nonzero(is_eot[1:] & is_eot[:-1])) + int(is_eot[0] and after_eot)
            after_eot = bool(is_eot[-1])
        if sample_frac > 0:
            k = min(len(chunk), max(1, round(len(chunk) * sample_frac)))
            id_counts += np.bincount(chunk[:k], minlength=len(id_counts))[: len(id_counts)]
            scan.n_sampled += k
        scan.n_tokens += len(chunk)
        scan.last_token = int(chunk[-1])
    scan.sha256 = h.hexdigest() if h is not None else None
    scan.id_counts = id_counts
    return scan


@dataclass
class ByteScan:
    n_bytes: int = 0
    sha256: str | None = None
    utf8_error: str | None = None  # the first decoding error, with its byte offset


def scan_bytes(path: str | os.PathLike, *, hash: bool = True, on_bytes=None) -> ByteScan:
    """sha256 and UTF-8 validity of a byte stream, chunk by chunk (a character may span chunks)."""
    scan = ByteScan()
    h = hashlib.sha256() if hash else None
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    for chunk in _chunks(path, BYTE_DTYPE, on_bytes):
        raw = memoryview(chunk)
        if h is not None:
            h.update(raw)
        if scan.utf8_error is None:
            try:
                decoder.decode(raw)
            except UnicodeDecodeError as e:
                scan.utf8_error = f"invalid UTF-8 at byte {scan.n_bytes + e.start:,} ({e.reason})"
        scan.n_bytes += len(raw)
    if scan.utf8_error is None:
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError as e:
            scan.utf8_error = f"truncated UTF-8 character at the end ({e.reason})"
    scan.sha256 = h.hexdigest() if h is not None else None
    return scan


def example_blocks(offsets: np.ndarray, n_tokens: int, block_tokens: int = EXAMPLE_BLOCK_TOKENS):
    """(lo, hi, starts - lo) for runs of whole examples of about `block_tokens` tokens each.

    `offsets` are the SFT start offsets (validated: 0, strictly increasing, < n_tokens). A single
    example longer than a block is its own block.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    i = 0
    while i < len(offsets):
        lo = int(offsets[i])
        j = max(i + 1, int(np.searchsorted(offsets, lo + block_tokens, side="right")))
        hi = int(offsets[j]) if j < len(offsets) else n_tokens
        yield lo, hi, offsets[i:j] - lo
        i = j


def example_lengths(offsets: np.ndarray, n_tokens: int) -> np.ndarray:
    offsets = np.asarray(offsets, dtype=np.int64)
    return np.diff(np.append(offsets, n_tokens)) if len(offsets) else np.zeros(0, dtype=np.int64)
