"""niels_gpt.atomic: nothing reaches a final name before it is complete, a failed write keeps the old
file and leaves no `*.tmp`, and the writers' builds go through it."""

from __future__ import annotations

import json
import os

import pytest

from niels_gpt import atomic
from niels_gpt.atomic import (
    StagedFile,
    StagedFiles,
    atomic_open,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    tmp_path_for,
)
from tests.support.chats import random_chats
from tests.support.corpus import tiny_corpus


class Boom(Exception):
    pass


def names(folder) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def test_the_temporary_name_is_the_final_name_plus_tmp(tmp_path):
    assert tmp_path_for(tmp_path / "a" / "meta.json") == tmp_path / "a" / "meta.json.tmp"
    assert tmp_path_for("shard_00000.bin").name == "shard_00000.bin.tmp"


def test_while_a_file_is_written_only_its_temporary_name_exists(tmp_path):
    final = tmp_path / "sub" / "data.bin"  # parent folders are created
    with atomic_open(final) as f:
        f.write(b"half")
        assert not final.exists() and tmp_path_for(final).read_bytes() == b""  # not flushed yet, but not final
        f.flush()
        assert tmp_path_for(final).read_bytes() == b"half" and not final.exists()
    assert final.read_bytes() == b"half" and names(tmp_path) == ["sub/data.bin"]


def test_a_write_that_fails_midway_keeps_the_previous_file_and_leaves_no_tmp(tmp_path):
    final = tmp_path / "meta.json"
    final.write_text("previous")
    with pytest.raises(Boom):
        with atomic_open(final, "w") as f:
            f.write("new and incompl")
            f.flush()
            raise Boom
    assert final.read_text() == "previous" and names(tmp_path) == ["meta.json"]


@pytest.mark.parametrize(
    "write, value, read",
    [
        (atomic_write_bytes, b"\x00\x01", lambda p: p.read_bytes()),
        (atomic_write_text, "Ünïcødé\n", lambda p: p.read_text(encoding="utf-8")),
    ],
)
def test_whole_file_writes_replace_the_previous_file(tmp_path, write, value, read):
    final = tmp_path / "f"
    final.write_bytes(b"old contents")
    write(final, value)
    assert read(final) == value and names(tmp_path) == ["f"]


def test_json_is_canonical(tmp_path):
    atomic_write_json(tmp_path / "a.json", {"b": 1, "a": {"ü": [1, 2]}})
    assert (tmp_path / "a.json").read_text(
        encoding="utf-8"
    ) == '{\n  "a": {\n    "ü": [\n      1,\n      2\n    ]\n  },\n  "b": 1\n}\n'


def test_a_json_value_that_cannot_be_written_keeps_the_previous_file(tmp_path):
    final = tmp_path / "meta.json"
    atomic_write_json(final, {"ok": True})
    with pytest.raises(TypeError):
        atomic_write_json(final, {"bad": object()})
    assert json.loads(final.read_text()) == {"ok": True} and names(tmp_path) == ["meta.json"]


def test_reading_mode_is_refused(tmp_path):
    with pytest.raises(ValueError, match="for writing"):
        StagedFile(tmp_path / "x", "rb")
    with pytest.raises(ValueError, match="for writing"):
        with atomic_open(tmp_path / "x", "r"):
            pass


def test_a_staged_file_reaches_its_final_name_only_by_commit(tmp_path):
    final = tmp_path / "tokens.bin"
    final.write_bytes(b"previous")
    staged = StagedFile(final)
    staged.write(b"new")
    staged.close()  # complete and fsynced, still temporary
    assert final.read_bytes() == b"previous" and tmp_path_for(final).read_bytes() == b"new"
    assert staged.commit() == final and final.read_bytes() == b"new" and names(tmp_path) == ["tokens.bin"]


def test_discarding_a_staged_file_removes_what_it_wrote(tmp_path):
    kept, committed = StagedFile(tmp_path / "a"), StagedFile(tmp_path / "b")
    kept.write(b"x")
    committed.write(b"y")
    committed.commit()
    kept.discard()
    committed.discard()  # a committed file of a build that failed later goes too
    assert names(tmp_path) == []


def test_staged_files_are_published_together_and_only_by_commit(tmp_path):
    with StagedFiles() as staged:
        tokens = staged.open(tmp_path / "train_tokens.bin")
        tokens.write(b"\x01\x00")
        staged.write_bytes(tmp_path / "train_idx.npy", b"idx")
        assert names(tmp_path) == ["train_idx.npy.tmp", "train_tokens.bin.tmp"]
        assert staged.commit() == [tmp_path / "train_tokens.bin", tmp_path / "train_idx.npy"]
    assert names(tmp_path) == ["train_idx.npy", "train_tokens.bin"]


def test_staged_files_leaving_without_commit_publish_nothing(tmp_path):
    (tmp_path / "train_tokens.bin").write_bytes(b"previous build")
    with pytest.raises(Boom):
        with StagedFiles() as staged:
            staged.open(tmp_path / "train_tokens.bin").write(b"half")
            staged.write_bytes(tmp_path / "train_idx.npy", b"idx")
            raise Boom
    assert names(tmp_path) == ["train_tokens.bin"] and (tmp_path / "train_tokens.bin").read_bytes() == b"previous build"
    with StagedFiles() as staged:  # a forgotten commit publishes nothing either
        staged.write_bytes(tmp_path / "x", b"x")
    assert names(tmp_path) == ["train_tokens.bin"]


def test_a_commit_that_fails_midway_leaves_none_of_the_files(tmp_path, monkeypatch):
    real_replace = os.replace
    calls = []

    def replace(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise OSError("disk full")
        real_replace(src, dst)

    monkeypatch.setattr(atomic.os, "replace", replace)
    with pytest.raises(OSError, match="disk full"):
        with StagedFiles() as staged:
            for name in ("a", "b", "c"):
                staged.write_bytes(tmp_path / name, name.encode())
            staged.commit()
    assert names(tmp_path) == []  # "a", already renamed, was removed with the rest


# ---- the writers build through atomic.py ----


def test_an_sft_build_that_fails_midway_shows_no_final_name_and_leaves_nothing(tiny_tokenizer, tmp_path, monkeypatch):
    from niels_gpt.sft import writer as sft_writer

    real, seen = sft_writer._write_split, []

    def write_split(batches, staged, out, split, *args):
        if split == "val":  # train's files are complete by now
            seen.extend(names(out))
            raise Boom
        return real(batches, staged, out, split, *args)

    monkeypatch.setattr(sft_writer, "_write_split", write_split)
    with pytest.raises(Boom):
        sft_writer.build_sft_cache(
            random_chats(20, seed=1), str(tmp_path / "c"), tokenizer=tiny_tokenizer, val_frac=0.2, seed=0
        )
    assert seen == ["train_idx.npy.tmp", "train_tokens.bin.tmp"]  # complete, but under temporary names
    assert not (tmp_path / "c").exists()


def test_a_pretrain_build_that_fails_midway_shows_no_final_name_and_leaves_nothing(tiny_tokenizer, tmp_path):
    from niels_gpt.pretrain.writer import build_pretrain_cache

    out, seen = tmp_path / "p", []

    def documents():
        for i, text in enumerate(tiny_corpus(400, seed=2)):
            if i == 399:  # several shards are closed by now
                seen.extend(names(out))
                raise Boom
            yield text

    with pytest.raises(Boom):
        build_pretrain_cache(
            documents(), str(out), tokenizer=tiny_tokenizer, max_train_tokens=None, max_val_tokens=None,
            shard_bytes=256, seed=0, shuffle_buffer=None, num_threads=1,
        )  # fmt: skip
    assert len(seen) > 2 and all(name.endswith(".tmp") for name in seen), seen
    assert names(out) == []
