"""Determinism: the same small in-memory input and the same seed give byte-identical cache files
(compared by sha256), pretrain and SFT alike."""

from __future__ import annotations

from pathlib import Path

from niels_gpt.cache.build_cache import build_pretrain_cache, build_pretrain_cache_presplit, build_sft_cache
from niels_gpt.cache.meta import sha256_file
from niels_gpt.pretrain import encode as batch_encode
from tests.support.chats import random_chats
from tests.support.corpus import tiny_corpus


def hashes(out: Path) -> dict[str, str]:
    return {p.relative_to(out).as_posix(): sha256_file(p) for p in sorted(out.rglob("*")) if p.is_file()}


def stream_build(out: Path, tok, *, seed=42, num_threads=-1):
    build_pretrain_cache(
        iter(tiny_corpus(150, seed=20)),
        str(out),
        tokenizer=tok,
        max_train_tokens=3000,
        max_val_tokens=400,
        shard_bytes=1000,
        seed=seed,
        shuffle_buffer=10_000,
        val_doc_prob=0.1,
        num_threads=num_threads,
    )
    return hashes(out)


def test_stream_build_twice_is_byte_identical(tmp_path, tiny_tokenizer):
    first = stream_build(tmp_path / "a", tiny_tokenizer)
    second = stream_build(tmp_path / "b", tiny_tokenizer)
    assert "meta.json" in first and "train/shard_00000.bin" in first and "val/shard_00000.bin" in first
    assert first == second
    assert stream_build(tmp_path / "a", tiny_tokenizer) == first  # rebuilding in place too


def test_batching_and_threads_do_not_change_the_bytes(tmp_path, tiny_tokenizer, monkeypatch):
    reference = stream_build(tmp_path / "a", tiny_tokenizer)
    monkeypatch.setattr(batch_encode, "BATCH_DOCS", 3)
    assert stream_build(tmp_path / "b", tiny_tokenizer, num_threads=1) == reference


def test_another_seed_changes_the_split(tmp_path, tiny_tokenizer):
    a, b = stream_build(tmp_path / "a", tiny_tokenizer, seed=1), stream_build(tmp_path / "b", tiny_tokenizer, seed=2)
    assert a["val/shard_00000.bin"] != b["val/shard_00000.bin"]


def test_presplit_build_twice_is_byte_identical(tmp_path, tiny_tokenizer):
    def build(out):
        build_pretrain_cache_presplit(
            tiny_corpus(40, seed=21),
            tiny_corpus(8, seed=22),
            str(out),
            tokenizer=tiny_tokenizer,
            max_train_tokens=None,
            max_val_tokens=None,
            shard_bytes=512,
            seed=42,
        )
        return hashes(out)

    assert build(tmp_path / "a") == build(tmp_path / "b")


def test_sft_build_twice_is_byte_identical_and_another_seed_changes_the_split(tiny_tokenizer, tmp_path):
    chats = random_chats(120, seed=11)

    def build(out, seed=42):
        build_sft_cache(iter(chats), str(out), tokenizer=tiny_tokenizer, val_frac=0.2, seed=seed)
        return hashes(out)

    first = build(tmp_path / "a")
    assert sorted(first) == ["meta.json", "train_idx.npy", "train_tokens.bin", "val_idx.npy", "val_tokens.bin"]
    assert build(tmp_path / "b") == first
    assert build(tmp_path / "a") == first  # rebuilding in place too
    assert build(tmp_path / "c", seed=7)["val_idx.npy"] != first["val_idx.npy"]
