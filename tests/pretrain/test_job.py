"""build_pretrain_source (config -> loader -> writer) and the build-pretrain command."""

from __future__ import annotations

import numpy as np
import pytest

from niels_gpt.cache.cli import main
from niels_gpt.cache.meta import REQUIRED_PRETRAIN, check_required, read_meta
from niels_gpt.cache.pretrain_dataset import PretrainTokenStreamDataset
from niels_gpt.config import prepare_config
from niels_gpt.data import registry
from niels_gpt.data.registry import PretrainInput
from niels_gpt.data.types import PretrainSample
from niels_gpt.pretrain import job as pretrain_job
from niels_gpt.splits import val_mask
from tests.support.corpus import tiny_corpus


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


@pytest.mark.parametrize("source", registry.PRETRAIN_SOURCES)
def test_disabled_source_writes_not_built_meta(tmp_path, source):
    cfg = prepare_config({"sources": {source: {"enabled": False}}})
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "shard_00000.bin").write_bytes(b"\0\0")  # stale shard of an earlier build
    meta = pretrain_job.build_pretrain_source(
        cfg, source, tokenizer_path="missing.model", out_dir=tmp_path, log=lambda s: None
    )
    assert meta == read_meta(str(tmp_path / "meta.json"))
    check_required(meta, REQUIRED_PRETRAIN)
    assert meta["built"] is False and meta["reason"] == f"sources.{source}.enabled is false"
    assert (meta["train_tokens"], meta["val_tokens"]) == (0, 0)
    assert [list((tmp_path / s).iterdir()) for s in ("train", "val")] == [[], []]
    refusal = rf"{tmp_path}: this pretrain cache was not built \(sources.{source}.enabled is false\); enable"
    with pytest.raises(ValueError, match=refusal):
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
            "sources.roam.max_val_tokens=1_00",
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
    assert meta["built"] and meta["train_tokens"] > 0 and meta["val_tokens"] == 100 and meta["seed"] == 5
    assert "pre-split" in meta["split_rule"] and meta["provenance"]["val_frac"] == 0.2
    files = meta["provenance"]["files"]
    assert (len(files["train"]), len(files["val"])) == (16, 4)  # a fifth of the 20 notes
    assert set(files["val"]) == {f"note{i:02d}.md" for i, v in enumerate(val_mask(20, 0.2, 5)) if v}
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
@pytest.mark.parametrize("strip_boilerplate", [True, False])
def test_raw_gutenberg_books_lose_their_boilerplate_and_meta_counts_it(
    tmp_path, tiny_tokenizer_path, strip_boilerplate
):
    from niels_gpt.tokenizer import SentencePieceTokenizer
    from tests.support.hub_files import raw_gutenberg_book, write_parquet

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
        "strip_boilerplate": strip_boilerplate,
    }
    cfg = prepare_config({"demo": True, "seed": 1, "sources": {"gutenberg": gutenberg}})
    meta = pretrain_job.build_pretrain_source(
        cfg, "gutenberg", tokenizer_path=tiny_tokenizer_path, out_dir=tmp_path / "out", log=lambda s: None
    )
    tok = SentencePieceTokenizer(tiny_tokenizer_path)
    decoded = []
    for s in ("train", "val"):
        tokens = PretrainTokenStreamDataset(tmp_path / "out" / s, T=1).maps[0]
        decoded += [
            tok.decode(doc.tolist()) for doc in np.split(tokens, np.flatnonzero(tokens == tok.eot_id) + 1) if len(doc)
        ]
    assert meta["train_documents"] + meta["val_documents"] == 6 == len(decoded) and meta["val_documents"] > 0
    assert not any("\ufeff" in d or "\r" in d for d in decoded)  # normalization, whatever the setting
    if not strip_boilerplate:  # the books whole: header, markers, footer
        assert meta["cleaning"] == {"skipped_blank": 1}
        assert sorted(decoded) == sorted(t.replace("\r\n", "\n")[1:] for t in texts[:6])
        return
    removed = sum(len(t.replace("\r\n", "\n")) - 1 - len(b) for t, b in zip(texts, bodies))  # - 1: the BOM
    assert meta["cleaning"] == {
        "skipped_blank": 1,
        "boilerplate_books_stripped": 6,
        "boilerplate_chars_removed": removed,
    }
    assert sorted(decoded) == sorted(bodies)


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


# ---- config keys of the pretrain sources, seen in the shards ----


def demo_config(root, source: str, settings: dict) -> dict:
    """The loader fixtures' demo tree with `settings` for `source` (enabled)."""
    from niels_gpt.config import deep_merge
    from tests.support.hub_files import write_demo_tree

    return prepare_config(deep_merge(write_demo_tree(root), {"sources": {source: {"enabled": True, **settings}}}))


def shard_tokens(split_dir) -> list[int]:
    from niels_gpt.token_files import list_shards

    return [t for p in list_shards(split_dir) for t in np.fromfile(p, dtype="<u2").tolist()]


@pytest.mark.usefixtures("isolated_hf_cache")
@pytest.mark.parametrize("source", registry.PRETRAIN_SOURCES)
def test_budgets_cut_each_source_exactly(tmp_path, tiny_tokenizer_path, source):
    stream = {"val_doc_prob": 0.5} if source in registry.STREAMED_SOURCES else {}
    built = {}
    for name, budgets in (("cut", {"max_train_tokens": 10, "max_val_tokens": 3}), ("all", {})):
        cfg = demo_config(tmp_path / name / "demo", source, {**stream, **budgets})
        out = tmp_path / name / "out"
        built[name] = pretrain_job.build_pretrain_source(
            cfg, source, tokenizer_path=tiny_tokenizer_path, out_dir=out, log=lambda s: None
        )
        for split in ("train", "val"):
            assert len(shard_tokens(out / split)) == built[name][f"{split}_tokens"]
    assert (built["cut"]["train_tokens"], built["cut"]["val_tokens"]) == (10, 3)
    assert built["all"]["train_tokens"] > 10 and built["all"]["val_tokens"] > 3  # the budgets cut something


@pytest.mark.usefixtures("isolated_hf_cache")
@pytest.mark.parametrize("source", registry.STREAMED_SOURCES)
def test_val_doc_prob_decides_how_many_documents_go_to_val(tmp_path, tiny_tokenizer_path, source):
    val_docs = {}
    for prob in (0.5, 0.9):
        cfg = demo_config(tmp_path / str(prob) / "demo", source, {"val_doc_prob": prob, "max_val_tokens": None})
        meta = pretrain_job.build_pretrain_source(
            cfg, source, tokenizer_path=tiny_tokenizer_path, out_dir=tmp_path / str(prob) / "out", log=lambda s: None
        )
        assert (
            meta["val_doc_prob"] == prob and meta["train_documents"] + meta["val_documents"] == meta["documents_seen"]
        )
        val_docs[prob] = meta["val_documents"]
    assert 0 < val_docs[0.5] < val_docs[0.9]
