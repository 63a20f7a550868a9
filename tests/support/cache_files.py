"""Reading caches back in tests, independently of the package's readers: SFT examples, pretrain shard
tokens and documents, file hashes; and writing numbered shards whose values tell where they came from."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from niels_gpt.token_files import list_shards


def read_sft_split(out, split: str) -> list[list[int]]:
    """Every example of an SFT split as token ids; checks the formats on the way (uint16 tokens: an even
    byte size; int64 offsets: start at 0, increase, and stay inside the tokens)."""
    path = os.path.join(out, f"{split}_tokens.bin")
    assert os.path.getsize(path) % 2 == 0
    tokens = np.fromfile(path, dtype="<u2")
    idx = np.load(os.path.join(out, f"{split}_idx.npy"))
    assert idx.dtype == np.dtype("<i8") and idx.ndim == 1
    if len(idx):
        assert idx[0] == 0 and (np.diff(idx) > 0).all() and idx[-1] < len(tokens)
    bounds = list(idx) + [len(tokens)]
    return [tokens[a:b].tolist() for a, b in zip(bounds[:-1], bounds[1:])]


def split_tokens(out: Path, split: str) -> np.ndarray:
    """Every token of a pretrain split, its shards in order."""
    paths = list_shards(Path(out) / split)
    return np.concatenate([np.fromfile(p, dtype="<u2") for p in paths]) if paths else np.zeros(0, "<u2")


def documents(tokens: np.ndarray, eot: int) -> list[list[int]]:
    """eot-terminated documents (a trailing run without eot is a cut document)."""
    docs, cur = [], []
    for t in tokens.tolist():
        if t == eot:
            docs.append(cur)
            cur = []
        else:
            cur.append(t)
    return docs + ([cur] if cur else [])


def file_hashes(out: Path, skip: str | None = None) -> dict[str, str]:
    """sha256 of every file under `out`, by its path relative to `out`; files under a folder named `skip` left out."""
    out = Path(out)
    return {
        p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(out.rglob("*"))
        if p.is_file() and skip not in p.parts
    }


def numbered_shards(split_dir: Path, lengths: list[int], offset: int = 0) -> Path:
    """Shards whose token values are their global position + offset: a value tells where it came from."""
    split_dir.mkdir(parents=True)
    start = offset
    for i, n in enumerate(lengths):
        np.arange(start, start + n, dtype="<u2").tofile(split_dir / f"shard_{i:05d}.bin")
        start += n
    return split_dir
