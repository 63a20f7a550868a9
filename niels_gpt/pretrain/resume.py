"""A streamed pretrain build's checkpoint: what a rerun needs to continue where a failed build stopped.

On disk, in `{out_dir}/.resume/` (layout.resume_dir: not a Snakemake output, so a failed job's cleanup
keeps it; a dot folder, so the cache-tree walker ignores it):
  {train,val}/shard_NNNNN.bin   the shards being written; renamed into {out_dir}/{train,val}/ only when
                                the whole build has succeeded
  stream-NNNNN.arrow            the stream's rows read but not yet used: the current block, then the
                                shuffle buffer (Arrow IPC file; resumable.ShuffledStream.state)
  checkpoint.json               written last, atomically, so it names only complete files:
      format, key (and its sha256), the writers (closed shards with tokens and sha256, the open shard's
      tokens, documents), documents_seen, skipped_blank, the split rule's generator state, the loaders'
      cleaning counts, the stream's position and its Arrow file

The key is everything the bytes depend on that the job knows before reading: the job's spec (the
source's config section, seed, demo, shard_bytes, the part), the tokenizer sha256 and FORMAT_VERSION;
the stream's position also names its files, seed, buffer and commit, and a stream refuses a position
that is not its own. A checkpoint with another key is removed and the build starts afresh; a finished
build removes the folder.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from niels_gpt.atomic import atomic_open, atomic_write_json
from niels_gpt.hashing import sha256_json
from niels_gpt.layout import resume_dir
from niels_gpt.log import log

CHECKPOINT_FORMAT = 1  # bump when checkpoint.json changes meaning
CHECKPOINT = "checkpoint.json"
STREAM_TABLE = "stream-{seq:05d}.arrow"


class Checkpoint:
    """The checkpoint folder of one build: `load()` the saved state (None: start afresh), `save()` a new
    one every `every_tokens` tokens (and when the stream fails), `clear()` once the build is done."""

    def __init__(self, out_dir: str | Path, key: dict, *, every_tokens: int):
        self.dir = Path(resume_dir(out_dir))
        self.key = key
        self.key_sha256 = sha256_json(key)
        self.every_tokens = every_tokens
        self.seq = 0

    def stage(self, split: str) -> Path:
        """Where `split`'s shards are written until the build succeeds."""
        return self.dir / split

    def load(self) -> dict | None:
        """The saved state, with its stream table (`state["stream_table"]`, an Arrow table or None);
        None if there is none. One for another key, or unreadable, is removed (logged)."""
        path = self.dir / CHECKPOINT
        if not path.is_file():
            if self.dir.exists():
                self.clear()  # shards of a build that never saved a checkpoint
            return None
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
            if state.get("format") != CHECKPOINT_FORMAT or state.get("key_sha256") != self.key_sha256:
                log(
                    f"{self.dir}: a checkpoint of another build (its config, tokenizer or format differ); "
                    "starting afresh"
                )
                self.clear()
                return None
            state["stream_table"] = self._read_table(state.get("stream_file"))
        except (OSError, ValueError, KeyError) as e:
            log(f"{self.dir}: unreadable checkpoint ({type(e).__name__}: {e}); starting afresh")
            self.clear()
            return None
        self.seq = state.get("seq", 0)
        return state

    def _read_table(self, name: str | None):
        if name is None:
            return None
        import pyarrow as pa

        with pa.memory_map(str(self.dir / name)) as source:
            return pa.ipc.open_file(source).read_all()

    def save(self, state: dict, table: Any) -> None:
        """Write `table` (the stream's unread rows, or None), then checkpoint.json naming it; remove older tables."""
        self.seq += 1
        name = None
        if table is not None:
            import pyarrow as pa

            name = STREAM_TABLE.format(seq=self.seq)
            with atomic_open(self.dir / name, "wb") as f, pa.ipc.new_file(f, table.schema) as out:
                out.write_table(table)
        atomic_write_json(
            self.dir / CHECKPOINT,
            {
                **state,
                "format": CHECKPOINT_FORMAT,
                "key": self.key,
                "key_sha256": self.key_sha256,
                "seq": self.seq,
                "stream_file": name,
            },
        )
        for old in self.dir.glob("stream-*.arrow"):
            if old.name != name:
                old.unlink(missing_ok=True)

    def clear(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def remove_checkpoint(out_dir: str | Path) -> None:
    """Remove the checkpoint folder of `out_dir`, if any (a source no longer built as a stream)."""
    shutil.rmtree(resume_dir(out_dir), ignore_errors=True)
