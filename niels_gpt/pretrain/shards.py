"""Writing uint16 token shards: `split_dir/shard_NNNNN.bin`, rotating at `shard_bytes`, up to a budget.

A shard holds `shard_bytes // 2` tokens (the last of a split may hold fewer); tokens run on from one
shard into the next, so a document may span two shards. Every shard is a file of one
`atomic.StagedFiles`: written under its temporary name `shard_NNNNN.bin.tmp` with its sha256 computed
on the fly (no re-read), fsynced when full, and renamed by `commit()` only once the whole build has
succeeded; `abort()` removes them all. `prepare_out_dir` takes a previous build down
(`meta.unpublish`: meta.json first), so an old meta.json never sits beside new shards.

A resumable build (`stage_dir`: the checkpoint folder, pretrain/resume.py) writes `stage_dir/shard_NNNNN.bin`
instead, keeps those files when it fails (`abort()` only closes them), saves its position with
`checkpoint()` (the open shard fsynced) and continues from one with `restore()`.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from niels_gpt.atomic import TMP_SUFFIX, StagedFile, StagedFiles
from niels_gpt.hashing import HASH_CHUNK_BYTES
from niels_gpt.layout import META, SHARD_GLOB, SPLITS, shard_name
from niels_gpt.meta import unpublish
from niels_gpt.token_files import TOKEN_BYTES

DEFAULT_SHARD_BYTES = 128 * 1024 * 1024  # 128 MiB per shard: few files, each far below any size limit


class ShardWriter:
    """Append uint16 tokens to `split_dir/shard_NNNNN.bin.tmp`, rotating at `shard_bytes`, up to `budget`."""

    def __init__(
        self,
        split_dir: str | os.PathLike,
        *,
        shard_bytes: int,
        budget: int | None,
        stage_dir: str | os.PathLike | None = None,
    ):
        if shard_bytes < TOKEN_BYTES:
            raise ValueError(f"shard_bytes must be >= {TOKEN_BYTES} (one uint16 token), got {shard_bytes}")
        self.dir = Path(split_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.tokens_per_shard = shard_bytes // TOKEN_BYTES
        self.budget = budget
        self.stage_dir = Path(stage_dir) if stage_dir is not None else None
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

    def _stage_path(self, index: int) -> Path | None:
        return None if self.stage_dir is None else self.stage_dir / shard_name(index)

    def _open(self, mode: str = "wb") -> None:
        index = len(self.shards)
        self._file = self._staged.open(self.dir / shard_name(index), mode, tmp=self._stage_path(index))
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
        """Close and delete every shard of this build, temporary or already renamed; a resumable build's
        staged shards are only closed (its checkpoint names them; `restore` cuts what came after it)."""
        self._file = None
        if self.stage_dir is None or self._staged.committed:
            self._staged.discard()
        else:
            for staged in self._staged.files:
                staged.file.close()

    def reset(self) -> None:
        """Delete everything written (staged files included) and start again from zero tokens."""
        self._file = None
        self._staged.discard()
        self._staged = StagedFiles()
        self.shards, self.n_tokens, self.n_documents, self._in_shard = [], 0, 0, 0

    def checkpoint(self) -> dict:
        """This writer's position, JSON-able: the open shard is flushed and fsynced first."""
        if self._file is not None:
            self._file.file.flush()
            os.fsync(self._file.file.fileno())
        open_shard = None if self._file is None else {"file": shard_name(len(self.shards)), "tokens": self._in_shard}
        return {
            "n_tokens": self.n_tokens,
            "n_documents": self.n_documents,
            "shards": [dict(s) for s in self.shards],
            "open": open_shard,
        }

    def restore(self, state: dict) -> None:
        """Continue from `checkpoint()`'s `state` (a fresh resumable writer): the closed shards are taken
        as they are, the open one is cut back to its saved length and re-hashed, later files are removed.
        A staged file missing or shorter than the state says is a ValueError."""
        if self.stage_dir is None or self.shards or self._file is not None:
            raise ValueError("restore() needs a fresh ShardWriter with a stage_dir")
        for s in state["shards"]:
            self._check_staged(s["file"], s["tokens"], exact=True)
            self._staged.open(self.dir / s["file"], "ab", tmp=self.stage_dir / s["file"]).close()
            self.shards.append(dict(s))
        opened = state["open"]
        if opened is not None:
            path = self._check_staged(opened["file"], opened["tokens"])
            os.truncate(path, opened["tokens"] * TOKEN_BYTES)
            self._open("ab")
            with open(path, "rb") as f:
                while data := f.read(HASH_CHUNK_BYTES):
                    self._hash.update(data)
            self._in_shard = opened["tokens"]
        known = {s["file"] for s in self.shards} | ({opened["file"]} if opened else set())
        for stray in self.stage_dir.glob(SHARD_GLOB):
            if stray.name not in known:
                stray.unlink()
        self.n_tokens, self.n_documents = state["n_tokens"], state["n_documents"]

    def _check_staged(self, name: str, tokens: int, exact: bool = False) -> Path:
        path = self.stage_dir / name
        size = path.stat().st_size if path.is_file() else None
        if size is None or size < tokens * TOKEN_BYTES or (exact and size != tokens * TOKEN_BYTES):
            raise ValueError(
                f"{path}: {'missing' if size is None else f'{size:,} bytes'}, the checkpoint counts {tokens:,} tokens"
            )
        return path


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
