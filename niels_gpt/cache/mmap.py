"""Memory-map helpers for the uint16 token files every cache reader and writer shares.

A token file is raw little-endian uint16 (`formats.TOKEN_DTYPE`), so its length in tokens is its
byte size / 2 and an odd byte size means a damaged file. Readers only ever see final names:
`list_shards` ignores `*.tmp` (files a running or killed build left under their temporary name).
`open_tokens` maps a file read-only; slicing the map reads only the pages touched, never the
whole file.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from niels_gpt.atomic import TMP_SUFFIX
from niels_gpt.cache.formats import SHARD_GLOB, TOKEN_DTYPE

TOKEN_BYTES = TOKEN_DTYPE.itemsize  # 2: uint16 ids


def token_count(path: str | os.PathLike) -> int:
    """Tokens in a uint16 file, from its size alone (nothing is read)."""
    size = os.path.getsize(path)
    if size % TOKEN_BYTES:
        raise ValueError(
            f"{path}: {size:,} bytes is not a whole number of uint16 tokens; "
            "the file is damaged - rebuild the cache"
        )
    return size // TOKEN_BYTES


def open_tokens(path: str | os.PathLike) -> np.ndarray:
    """Read-only memory map of a uint16 token file (an empty file gives an empty array)."""
    n = token_count(path)
    if n == 0:
        return np.zeros(0, dtype=TOKEN_DTYPE)  # np.memmap cannot map an empty file
    return np.memmap(path, dtype=TOKEN_DTYPE, mode="r", shape=(n,))


def list_shards(split_dir: str | os.PathLike) -> list[Path]:
    """`shard_*.bin` files of a split directory in name order; temporary `*.tmp` files are ignored."""
    d = Path(split_dir)
    if not d.is_dir():
        raise NotADirectoryError(
            f"{d}: no such shard directory; build the cache first "
            "(`snakemake -j4 cache/all` or `python -m niels_gpt.cache.cli build-pretrain ...`)"
        )
    return sorted(p for p in d.glob(SHARD_GLOB) if not p.name.endswith(TMP_SUFFIX))


def remove_files(directory: str | os.PathLike, patterns: tuple[str, ...]) -> list[Path]:
    """Delete the files of `directory` matching any glob pattern; returns what was removed."""
    d = Path(directory)
    removed = []
    if not d.is_dir():
        return removed
    for pattern in patterns:
        for p in sorted(d.glob(pattern)):
            if p.is_file():
                p.unlink()
                removed.append(p)
    return removed
