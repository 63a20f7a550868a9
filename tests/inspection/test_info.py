"""`info`: the numbers measured from the files agree with meta.json; --json holds the same numbers."""

from __future__ import annotations

import json

import numpy as np

from niels_gpt.inspection.info_tables import human_bytes
from niels_gpt.tokenizer import train_sentencepiece
from tests.support.cache_tree import STREAM_TEXT, install_tokenizer, meta_of
from tests.support.cli import cache_cli, row, section
from tests.support.corpus import tiny_corpus


def test_info_numbers_match_meta(tree, capsys, tiny_tokenizer):
    rc, out, _ = cache_cli(capsys, "info", tree)
    assert rc == 0
    pre, sft = meta_of(tree / "pretrain/x"), meta_of(tree / "sft/y")
    for split in ("train", "val"):
        cells = row(out, "pretrain/x", split, "yes")
        assert cells[3] == f"{pre[f'{split}_tokens']:,}"
        assert cells[4] == f"{pre[f'{split}_documents']:,} documents"
        assert cells[6] == str(len(pre["shards"][split]))
        assert cells[7] == tiny_tokenizer.sha256[:8]
        cells = row(out, "sft/y", split, "yes")
        assert cells[3] == f"{sft[f'{split}_tokens']:,}" and cells[4] == f"{sft[f'{split}_examples']:,} examples"
        stats = sft["splits"][split]
        share = 100 * stats["num_label_tokens"] / stats["num_tokens"]
        assert (
            row(out, "sft/y", split, f"{stats['num_examples']:,}")[3] == f"{stats['num_label_tokens']:,} ({share:.1f}%)"
        )
    assert row(out, "pretrain/off", "-")[2] == "no" and "pretrain/off: not built: sources.off.enabled is false" in out
    assert row(out, "tokenizer", "-", "yes")[4] == f"{tiny_tokenizer.vocab_size:,} pieces"
    n_bytes = len(STREAM_TEXT[: len(STREAM_TEXT) // 2].encode("utf-8"))
    assert row(out, "streams/wiki_train", "train", "yes")[5] == human_bytes(n_bytes) == f"{n_bytes / 1000:.1f} KB"


def test_info_json_has_the_same_numbers_as_the_tables(tree, capsys, tiny_tokenizer):
    rc, out, _ = cache_cli(capsys, "info", tree, "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["tokenizer"]["sha256"] == tiny_tokenizer.sha256
    rows = {(r["artifact"], r["split"]): r for r in doc["rows"]}
    pre, sft = meta_of(tree / "pretrain/x"), meta_of(tree / "sft/y")
    for split in ("train", "val"):
        assert rows["pretrain/x", split]["tokens"] == pre[f"{split}_tokens"]
        assert rows["pretrain/x", split]["extra"]["documents"] == pre[f"{split}_documents"]
        assert rows["sft/y", split]["extra"]["labels"] == sft["splits"][split]["num_label_tokens"]
    assert rows["pretrain/off", "-"]["built"] == "no" and "not built" in rows["pretrain/off", "-"]["note"]
    _, table, _ = cache_cli(capsys, "info", tree)
    assert row(table, "sft/y", "train", "yes")[3] == f"{rows['sft/y', 'train']['tokens']:,}"


def test_info_pretrain_documents_empty_docs_and_coverage(tree, capsys, tiny_tokenizer):
    rc, out, _ = cache_cli(capsys, "info", tree / "pretrain" / "x")
    cells = row(section(out, "pretrain"), "pretrain/x", "train")
    docs = meta_of(tree / "pretrain/x")["train_documents"]
    assert cells[2] == f"{docs:,}" and cells[3] == "0"  # the writer never writes an empty document
    assert cells[4] == f"{2500 / docs:,.1f}"  # mean document length: the train budget is 2,500 tokens
    train = np.concatenate([np.fromfile(p, dtype="<u2") for p in sorted((tree / "pretrain/x/train").glob("*.bin"))])
    assert cells[5] == f"{100 * len(np.unique(train)) / tiny_tokenizer.vocab_size:.1f}%"
    shard = tree / "pretrain/x/train/shard_00000.bin"
    tokens = np.fromfile(shard, dtype="<u2")
    first = int(np.flatnonzero(tokens == tiny_tokenizer.eot_id)[0])
    tokens[first + 1] = tiny_tokenizer.eot_id  # an empty document
    tokens.tofile(shard)
    rc, out, _ = cache_cli(capsys, "info", tree / "pretrain" / "x")
    assert row(section(out, "pretrain"), "pretrain/x", "train")[2:4] == [f"{docs + 1:,}", "1"]


def test_info_marks_caches_built_with_another_tokenizer(tree, capsys, tmp_path):
    other = train_sentencepiece(tiny_corpus(200, seed=9), tmp_path / "other.model", vocab_size=380, num_threads=1)
    install_tokenizer(tree, tmp_path / "other.model")
    rc, out, _ = cache_cli(capsys, "info", tree)
    assert (
        rc == 0
        and row(out, "pretrain/x", "train")[-1].endswith(" !=")
        and row(out, "tokenizer")[-1] == other.sha256[:8]
    )


def test_info_caps_the_coverage_sample(tree, capsys, monkeypatch):
    from niels_gpt.inspection import info as cache_stats

    monkeypatch.setattr(cache_stats, "COVERAGE_SAMPLE_TOKENS", 100)
    rc, out, _ = cache_cli(capsys, "info", tree / "pretrain" / "x")
    assert row(section(out, "pretrain"), "pretrain/x", "train")[5].endswith(" (sample of 100)")
