"""Token shards (pretrain/shards.py): rotation at shard_bytes, budgets, hashes computed on the fly,
temporary names until commit, abort, and taking a previous build down meta.json first."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from niels_gpt.pretrain import shards as shards_module
from niels_gpt.pretrain.shards import ShardWriter, prepare_out_dir, run_writers


def names(folder) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def tokens(n: int, start: int = 0) -> np.ndarray:
    return np.arange(start, start + n, dtype="<u2")


def test_shards_rotate_at_shard_bytes_and_are_hashed_as_written(tmp_path):
    w = ShardWriter(tmp_path / "train", shard_bytes=8, budget=None)  # 4 tokens per shard
    assert w.write(tokens(6)) == 6 and w.write(tokens(5, 6)) == 5
    w.finish()
    assert [s["tokens"] for s in w.shards] == [4, 4, 3] and w.n_tokens == 11
    assert names(tmp_path) == [f"train/shard_0000{i}.bin.tmp" for i in range(3)]  # nothing final yet
    w.commit()
    assert names(tmp_path) == [f"train/shard_0000{i}.bin" for i in range(3)]
    for i, s in enumerate(w.shards):
        data = (tmp_path / "train" / s["file"]).read_bytes()
        assert s["sha256"] == hashlib.sha256(data).hexdigest() and data == tokens(11)[4 * i : 4 * i + 4].tobytes()


def test_the_budget_cuts_exactly(tmp_path):
    w = ShardWriter(tmp_path, shard_bytes=1 << 10, budget=5)
    assert (w.write(tokens(3)), w.full) == (3, False)
    assert (w.write(tokens(3)), w.full, w.write(tokens(9))) == (2, True, 0)
    assert ShardWriter(tmp_path / "z", shard_bytes=2, budget=0).full


def test_a_shard_smaller_than_one_token_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"^shard_bytes must be >= 2 \(one uint16 token\), got 1$"):
        ShardWriter(tmp_path, shard_bytes=1, budget=None)


def test_abort_removes_every_shard_of_the_build(tmp_path):
    w = ShardWriter(tmp_path, shard_bytes=4, budget=None)
    w.write(tokens(5))  # two shards closed, one open
    w.abort()
    assert names(tmp_path) == []


def test_run_writers_publishes_every_split_or_none(tmp_path):
    writers = {s: ShardWriter(tmp_path / s, shard_bytes=4, budget=None) for s in ("train", "val")}

    def fill():
        writers["train"].write(tokens(5))
        writers["val"].write(tokens(1))
        writers["train"].n_documents += 2
        return {"extra": 1}

    meta = run_writers(writers, fill)
    assert meta["extra"] == 1 and (meta["train_tokens"], meta["val_tokens"], meta["train_documents"]) == (5, 1, 2)
    assert [s["file"] for s in meta["shards"]["train"]] == ["shard_00000.bin", "shard_00001.bin", "shard_00002.bin"]
    assert names(tmp_path) == [
        "train/shard_00000.bin",
        "train/shard_00001.bin",
        "train/shard_00002.bin",
        "val/shard_00000.bin",
    ]


def test_run_writers_aborts_every_writer_when_fill_or_commit_fails(tmp_path, monkeypatch):
    writers = {s: ShardWriter(tmp_path / s, shard_bytes=4, budget=None) for s in ("train", "val")}

    def fill():
        writers["train"].write(tokens(5))
        raise RuntimeError("connection lost")

    with pytest.raises(RuntimeError, match="connection lost"):
        run_writers(writers, fill)
    assert names(tmp_path) == []

    writers = {s: ShardWriter(tmp_path / s, shard_bytes=4, budget=None) for s in ("train", "val")}
    real_commit = ShardWriter.commit

    def commit(self):
        if self.dir.name == "val":
            raise OSError("disk full")
        real_commit(self)

    monkeypatch.setattr(shards_module.ShardWriter, "commit", commit)
    with pytest.raises(OSError, match="disk full"):
        run_writers(writers, lambda: [w.write(tokens(3)) for w in writers.values()] and {})
    assert names(tmp_path) == []  # train's shards, already renamed, were removed too


def test_prepare_out_dir_takes_the_previous_build_down_meta_first(tmp_path, monkeypatch):
    for name in (
        "meta.json",
        "meta.json.tmp",
        "train/shard_00000.bin",
        "train/shard_00007.bin.tmp",
        "val/shard_00000.bin",
    ):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(b"\0\0")
    (tmp_path / "notes.txt").write_text("not ours")
    order = []
    real = shards_module.unpublish
    monkeypatch.setattr(shards_module, "unpublish", lambda meta, files: order.append(meta.name) or real(meta, files))
    assert prepare_out_dir(tmp_path) == tmp_path
    assert order == ["meta.json"] and names(tmp_path) == ["notes.txt"]
    assert (tmp_path / "train").is_dir() and (tmp_path / "val").is_dir()
    prepare_out_dir(tmp_path / "new")  # a folder that does not exist yet
    assert (tmp_path / "new" / "train").is_dir()
