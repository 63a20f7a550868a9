"""Writing uint16 token shards: `split_dir/shard_NNNNN.bin`, rotating at `shard_bytes`, up to a budget.

A shard holds `shard_bytes // 2` tokens (the last of a split may hold fewer); tokens run on from one
shard into the next, so a document may span two shards. Every shard is a file of one
`atomic.StagedFiles`: written under its temporary name `shard_NNNNN.bin.tmp` with its sha256 computed
on the fly (no re-read), fsynced when full, and renamed by `commit()` only once the whole build has
succeeded; `abort()` removes them all. `prepare_out_dir` takes a previous build down
(`meta.unpublish`: meta.json first), so an old meta.json never sits beside new shards.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from niels_gpt.atomic import TMP_SUFFIX, StagedFile, StagedFiles
from niels_gpt.layout import META, SHARD_GLOB, SPLITS, shard_name
from niels_gpt.meta import unpublish
from niels_gpt.token_files import TOKEN_BYTES

DEFAULT_SHARD_BYTES = 128 * 1024 * 1024  # 128 MiB per shard: few files, each far below any size limit


class ShardWriter:
    """Append uint16 tokens to `split_dir/shard_NNNNN.bin.tmp`, rotating at `shard_bytes`, up to `budget`."""

    def __init__(self, split_dir: str | os.PathLike, *, shard_bytes: int, budget: int | None):
        if shard_bytes < TOKEN_BYTES:
            raise ValueError(f"shard_bytes must be >= {TOKEN_BYTES} (one uint16 token), got {shard_bytes}")
        self.dir = Path(split_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.tokens_per_shard = shard_bytes // TOKEN_BYTES
        self.budget = budget
        self.n_tokens = 0
        self.n_documents = 0
        self.shards: list[dict] = []  # closed shards: file, tokens, sha256
        self._staged = StagedFiles()
        self._file: StagedFile | None = None
        self._hash = None
        self._in_shard = 0

    @property
    def full(self) -> bool:
        return self.budget is not None and self.n_tokens >= self.budget

    def write(self, tokens: np.ndarray) -> int:
        """Write as many of `tokens` as the budget allows; returns how many were written."""
        if self.budget is not None:
            tokens = tokens[: max(self.budget - self.n_tokens, 0)]
        done = 0
        while done < len(tokens):
            if self._file is None:
                self._open()
            chunk = tokens[done : done + self.tokens_per_shard - self._in_shard]
            self._file.write(memoryview(chunk))
            self._hash.update(memoryview(chunk))
            self._in_shard += len(chunk)
            done += len(chunk)
            if self._in_shard == self.tokens_per_shard:
                self._close_shard()
        self.n_tokens += done
        return done

    def _open(self) -> None:
        self._file = self._staged.open(self.dir / shard_name(len(self.shards)))
        self._hash = hashlib.sha256()
        self._in_shard = 0

    def _close_shard(self) -> None:
        self._file.close()  # fsynced
        self.shards.append(
            {"file": shard_name(len(self.shards)), "tokens": self._in_shard, "sha256": self._hash.hexdigest()}
        )
        self._file = None

    def finish(self) -> None:
        """Close the open shard (its data is fsynced); the shards keep their temporary names."""
        if self._file is not None:
            self._close_shard()

    def commit(self) -> None:
        """Rename every finished shard from `*.tmp` to its final name."""
        self._staged.commit()

    def abort(self) -> None:
        """Close and delete every shard of this build, temporary or already renamed."""
        self._file = None
        self._staged.discard()


def prepare_out_dir(out_dir: str | os.PathLike) -> Path:
    """Take a previous build down (`meta.unpublish`: meta.json FIRST, so no moment shows an old meta.json
    beside new shards, then every shard and temporary file of train/ and val/); returns the folder."""
    out = Path(out_dir)
    splits = [out / split for split in SPLITS]
    unpublish(out / META, [p for d in splits if d.is_dir() for g in (SHARD_GLOB, "*" + TMP_SUFFIX) for p in d.glob(g)])
    for d in splits:
        d.mkdir(parents=True, exist_ok=True)
    return out


def run_writers(writers: dict[str, ShardWriter], fill) -> dict:
    """Run `fill()` (it writes tokens and returns extra meta), then finish and rename every writer's
    shards; on any error abort them all (no shard keeps its final name) and re-raise.

    Returns fill's dict plus, per split, `{split}_tokens`, `{split}_documents` and `shards`.
    """
    try:
        extra = fill()
        for w in writers.values():
            w.finish()
        for w in writers.values():
            w.commit()
    except BaseException:
        for w in writers.values():
            w.abort()
        raise
    for split, w in writers.items():
        extra[f"{split}_tokens"] = w.n_tokens
        extra[f"{split}_documents"] = w.n_documents
    extra["shards"] = {split: w.shards for split, w in writers.items()}
    return extra
