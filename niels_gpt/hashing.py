"""sha256 of files, read in fixed chunks so hashing a multi-GB shard keeps memory flat, and of JSON data."""

from __future__ import annotations

import hashlib
import json
import os

HASH_CHUNK_BYTES = 1 << 20  # 1 MiB reads: flat memory, few Python iterations per GB


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(HASH_CHUNK_BYTES):
            h.update(chunk)
    return h.hexdigest()


def sha256_json(obj) -> str:
    """sha256 hex digest of `obj` as canonical JSON (sorted keys, no spaces): equal for equal data."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
