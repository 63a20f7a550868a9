"""build_pretrain_source (config -> loader -> writer) and the build-pretrain command."""

from __future__ import annotations

import pytest
from conftest import tiny_corpus

from niels_gpt.cache.cli import main
from niels_gpt.cache.meta import REQUIRED_PRETRAIN, check_required, read_meta
from niels_gpt.cache.pretrain_dataset import PretrainTokenStreamDataset
from niels_gpt.config import prepare_config
from niels_gpt.data import registry
from niels_gpt.data.registry import PretrainInput
from niels_gpt.data.types import PretrainSample
from niels_gpt.pretrain import job as pretrain_job


def fake_stream_input(texts):
    """Like the registry's stream input: provenance is filled only while the stream is read."""
    prov = {"source": "fineweb_edu", "stream": {}}

    def stream():
        prov["stream"].update(
            {
                "dataset_id": "HuggingFaceFW/fineweb-edu",
                "config": "CC-MAIN-2024-10",
                "revision": "abc123",
                "streaming": True,
            }
        )
        for t in texts:
            yield PretrainSample(t, "fineweb_edu", {})

    return PretrainInput("stream", stream(), None, None, prov)


def test_disabled_source_writes_not_built_meta(tmp_path):
    cfg = prepare_config({"sources": {"gutenberg": {"enabled": False}}})
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "shard_00000.bin").write_bytes(b"\0\0")  # stale shard of an earlier build
    meta = pretrain_job.build_pretrain_source(
        cfg, "gutenberg", tokenizer_path="missing.model", out_dir=tmp_path, log=lambda s: None
    )
    assert meta == read_meta(str(tmp_path / "meta.json"))
    check_required(meta, REQUIRED_PRETRAIN)
    assert meta["built"] is False and "enabled" in meta["reason"]
    assert (meta["train_tokens"], meta["val_tokens"]) == (0, 0)
    assert [list((tmp_path / s).iterdir()) for s in ("train", "val")] == [[], []]
    with pytest.raises((ValueError, FileNotFoundError), match="not built|no shard"):
        PretrainTokenStreamDataset(tmp_path / "train", T=4)


def test_stream_source_uses_config_values_and_late_provenance(tmp_path, tiny_tokenizer_path, monkeypatch):
    cfg = prepare_config(
        {
            "seed": 3,
            "pretrain": {"shard_bytes": 256},
            "sources": {
                "fineweb_edu": {
                    "max_train_tokens": 900,
                    "max_val_tokens": 100,
                    "val_doc_prob": 0.2,
                    "shuffle_buffer": 77,
                }
            },
        }
    )
    monkeypatch.setattr(registry, "pretrain_input", lambda c, s, **kw: fake_stream_input(tiny_corpus(100, seed=1)))
    lines = []
    meta = pretrain_job.build_pretrain_source(
        cfg, "fineweb_edu", tokenizer_path=tiny_tokenizer_path, out_dir=tmp_path, log=lines.append
    )
    assert (meta["train_tokens"], meta["val_tokens"], meta["seed"], meta["shard_bytes"]) == (900, 100, 3, 256)
    assert (meta["val_doc_prob"], meta["shuffle_buffer"]) == (0.2, 77)
    assert meta["dataset_name"] == "HuggingFaceFW/fineweb-edu" and meta["dataset_config"] == "CC-MAIN-2024-10"
    assert meta["dataset_revision"] == "abc123" and meta["streaming"] is True and "best effort" in meta["determinism"]
    assert "train: 900 tokens in 8 shards" in lines[1] and lines[2].startswith("val: 100 tokens in 1 shard ")


def test_cli_builds_roam_from_a_notes_folder(tmp_path, tiny_tokenizer_path, capsys):
    notes = tmp_path / "notes"
    notes.mkdir()
    for i, text in enumerate(tiny_corpus(20, seed=2)):
        (notes / f"note{i:02d}.md").write_text(text, encoding="utf-8")
    out = tmp_path / "cache"
    rc = main(
        [
            "build-pretrain",
            "--source",
            "roam",
            "--set",
            f"sources.roam.root={notes}",
            "--set",
            "sources.roam.val_frac=0.2",
            "--tokenizer",
            tiny_tokenizer_path,
            "--out-dir",
            str(out),
            "--set",
            "sources.roam.max_val_tokens=1_000",
            "--set",
            "seed=5",
            "--num-threads",
            "1",
            "--spec",
            "{}",
        ]
    )
    assert rc == 0
    meta = read_meta(str(out / "meta.json"))
    assert meta["built"] and meta["train_tokens"] > 0 and 0 < meta["val_tokens"] <= 1000 and meta["seed"] == 5
    assert "pre-split" in meta["split_rule"] and meta["provenance"]["val_frac"] == 0.2
    printed = capsys.readouterr().out
    assert f"train: {meta['train_tokens']:,} tokens in 1 shard" in printed


def test_cli_refuses_a_key_the_source_does_not_have(tmp_path):
    with pytest.raises(ValueError, match=r"unknown key 'sources.fineweb_edu.train_split'"):
        main(
            [
                "build-pretrain",
                "--source",
                "fineweb_edu",
                "--set",
                "sources.fineweb_edu.train_split=train",
                "--out-dir",
                str(tmp_path),
                "--spec",
                "{}",
            ]
        )


def test_cli_disabled_source(tmp_path, capsys):
    assert (
        main(
            [
                "build-pretrain",
                "--source",
                "gutenberg",
                "--set",
                "sources.gutenberg.enabled=false",
                "--spec",
                "{}",
                "--out-dir",
                str(tmp_path),
            ]
        )
        == 0
    )
    assert read_meta(str(tmp_path / "meta.json"))["built"] is False
    assert "not built" in capsys.readouterr().out


@pytest.mark.usefixtures("isolated_hf_cache")
def test_raw_gutenberg_books_lose_their_boilerplate_and_meta_counts_it(tmp_path, tiny_tokenizer_path):
    from loader_fixtures import raw_gutenberg_book, write_parquet

    from niels_gpt.tokenizer import SentencePieceTokenizer

    bodies = tiny_corpus(6, seed=3)
    start, end = "*** START OF THE PROJECT GUTENBERG EBOOK X ***", "*** END OF THE PROJECT GUTENBERG EBOOK X ***"
    texts = [raw_gutenberg_book(b, start, end) for b in bodies] + [" \r\n\t\r\n"]
    path = write_parquet(tmp_path / "en-00000-of-00001.parquet", {"id": list("0123456"), "text": texts})
    gutenberg = {
        "enabled": True,
        "dataset_id": "manu/project_gutenberg",
        "split": "en",
        "demo_data_files": {"en": str(path)},
        "shuffle_buffer": 0,
        "val_doc_prob": 0.5,
    }
    cfg = prepare_config({"demo": True, "seed": 1, "sources": {"gutenberg": gutenberg}})
    meta = pretrain_job.build_pretrain_source(
        cfg, "gutenberg", tokenizer_path=tiny_tokenizer_path, out_dir=tmp_path / "out", log=lambda s: None
    )
    removed = sum(len(t.replace("\r\n", "\n")) - 1 - len(b) for t, b in zip(texts, bodies))  # - 1: the BOM
    assert meta["cleaning"] == {
        "skipped_blank": 1,
        "boilerplate_books_stripped": 6,
        "boilerplate_chars_removed": removed,
    }
    tok = SentencePieceTokenizer(tiny_tokenizer_path)
    decoded = {
        tok.decode(
            [t for t in PretrainTokenStreamDataset(tmp_path / "out" / s, T=1).maps[0].tolist() if t != tok.eot_id]
        )
        for s in ("train", "val")
    }
    assert meta["train_documents"] + meta["val_documents"] == 6 and meta["val_documents"] > 0
    assert not any("GUTENBERG" in d or "\ufeff" in d or "\r" in d for d in decoded)


def test_cli_stops_on_a_split_that_would_be_empty(tmp_path, tiny_tokenizer_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    for i, text in enumerate(tiny_corpus(3, seed=2) + ["   \n", ""]):
        (notes / f"note{i}.md").write_text(text, encoding="utf-8")
    args = ["build-pretrain", "--source", "roam", "--set", f"sources.roam.root={notes}", "--spec", "{}"]
    args += ["--tokenizer", tiny_tokenizer_path, "--out-dir", str(tmp_path / "out"), "--set", "seed=0"]
    with pytest.raises(ValueError) as e:  # with seed 0 the one val file (of 5, val_frac 0.1) is a blank note
        main(args)
    assert str(e.value) == (
        "roam: the val split would hold 0 tokens (documents read: 1, blank: 1; split by "
        "sources.roam.val_frac=0.1). To fix: raise sources.roam.val_frac so val gets documents, or set "
        "sources.roam.max_val_tokens: 0 to build without val on purpose"
    )
    assert not (tmp_path / "out" / "meta.json").exists()
    assert main([*args, "--set", "sources.roam.max_val_tokens=0"]) == 0
    assert read_meta(str(tmp_path / "out" / "meta.json"))["empty_splits"] == {
        "val": "max_val_tokens is 0: built without val on purpose"
    }
