"""build_pretrain_source (pretrain/job.py): config -> loader -> writer, disabled sources, and the config
keys of every pretrain source seen in the shards."""

from __future__ import annotations

import numpy as np
import pytest

from niels_gpt.config import prepare_config
from niels_gpt.data import registry
from niels_gpt.data.registry import PretrainInput
from niels_gpt.data.types import PretrainSample
from niels_gpt.meta import REQUIRED_PRETRAIN, check_required, read_meta
from niels_gpt.pretrain import job as pretrain_job
from niels_gpt.pretrain.dataset import PretrainTokenStreamDataset
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
def test_read_margin_reads_past_the_budgets_for_curation(tmp_path, tiny_tokenizer_path):
    # dedup.read_margin: the raw build reads 50% more; curation cuts back to the budget (tests/curation)
    cfg = demo_config(tmp_path / "demo", "wikitext", {"max_train_tokens": 50, "max_val_tokens": 4})
    meta = pretrain_job.build_pretrain_source(
        cfg,
        "wikitext",
        tokenizer_path=tiny_tokenizer_path,
        out_dir=tmp_path / "raw",
        log=lambda s: None,
        read_margin=0.5,
    )
    assert (meta["train_tokens"], meta["val_tokens"]) == (75, 6)
    assert meta["provenance"]["read_margin"] == 0.5
    assert pretrain_job.raw_budget(None, 0.5) is None and pretrain_job.raw_budget(7, 0.05) == 8


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


@pytest.mark.usefixtures("isolated_hf_cache")
@pytest.mark.parametrize("source", registry.STREAMED_SOURCES)
def test_meta_records_the_library_releases_a_stream_was_read_with(tmp_path, tiny_tokenizer_path, source):
    from importlib.metadata import version

    cfg = demo_config(tmp_path / "demo", source, {"val_doc_prob": 0.5})
    meta = pretrain_job.build_pretrain_source(
        cfg, source, tokenizer_path=tiny_tokenizer_path, out_dir=tmp_path / "out", log=lambda s: None
    )
    stream = meta["provenance"]["stream"]
    assert stream["libraries"] == {"datasets": version("datasets"), "huggingface_hub": version("huggingface_hub")}
    assert stream["resume"] == "available"  # parquet files: read by resumable.py on every supported release


def test_a_stream_checkpoint_is_keyed_by_the_jobs_spec():
    from types import SimpleNamespace

    from niels_gpt.layout import FORMAT_VERSION

    cfg, tok = prepare_config({}), SimpleNamespace(sha256="ab" * 32)
    spec = {"seed": 42, "demo": False, "sources": {"fineweb_edu": cfg["sources"]["fineweb_edu"]}}
    key = pretrain_job.checkpoint_key(cfg, spec, tok, 3)
    assert key == {"format_version": FORMAT_VERSION, "spec": spec, "part": 3, "tokenizer_sha256": "ab" * 32}
    # without a spec (a direct call): the whole config but the retry settings, which never change the bytes
    other_hub = prepare_config({"hub": {"attempts": 2, "checkpoint_tokens": 7}})
    assert pretrain_job.checkpoint_key(cfg, None, tok, None) == pretrain_job.checkpoint_key(other_hub, None, tok, None)
    assert pretrain_job.checkpoint_key(prepare_config({"seed": 1}), None, tok, None) != pretrain_job.checkpoint_key(
        cfg, None, tok, None
    )
