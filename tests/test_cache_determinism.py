"""Same texts + same seed => byte-identical pretrain caches."""

from __future__ import annotations

from pathlib import Path

from niels_gpt.cache.meta import sha256_file
from niels_gpt.pretrain import encode as batch_encode
from niels_gpt.pretrain.writer import build_pretrain_cache, build_pretrain_cache_presplit
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
