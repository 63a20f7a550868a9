"""sha256 of files, read in fixed chunks so hashing a multi-GB shard keeps memory flat."""

from __future__ import annotations

import hashlib
import os

HASH_CHUNK_BYTES = 1 << 20  # 1 MiB reads: flat memory, few Python iterations per GB


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(HASH_CHUNK_BYTES):
            h.update(chunk)
    return h.hexdigest()
