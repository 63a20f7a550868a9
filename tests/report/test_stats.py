"""The numbers behind the figures agree with the text that went in, the meta.json, the dataset and `info`."""

from __future__ import annotations

import json

import numpy as np
import pytest

from niels_gpt import token_files
from niels_gpt.cache.sft_dataset import SFTExampleDataset
from niels_gpt.inspection.info import collect_info
from niels_gpt.layout import sft_dir
from niels_gpt.report import stats
from niels_gpt.sft.writer import build_sft_cache
from tests.support.cache_tree import ROAM_TRAIN, WIKI_SEGMENTS, WIKI_TRAIN, WIKI_VAL, install_tokenizer


def by_name(rows: list[dict], name: str) -> dict:
    return next(r for r in rows if r["name"] == name)


@pytest.mark.parametrize("chunk_bytes", [token_files.READ_CHUNK_BYTES, 10])
def test_document_lengths_are_the_token_counts_of_the_input_documents(
    report_tree, tiny_tokenizer, monkeypatch, chunk_bytes
):
    monkeypatch.setattr(token_files, "READ_CHUNK_BYTES", chunk_bytes)  # 5 tokens: documents cross every read and shard
    data = stats.pretrain_family(report_tree)
    wiki = by_name(data["sources"], "wikitext")["splits"]
    for split, docs in (("train", WIKI_TRAIN), ("val", WIKI_VAL)):
        lengths = [len(tiny_tokenizer.encode(d)) for d in docs]
        assert wiki[split]["documents"] == len(docs) and wiki[split]["tokens"] == sum(lengths) + len(docs)
        assert wiki[split]["length_hist"] == stats.length_histogram(lengths).tolist()
    assert [r["name"] for r in data["sources"]] == ["wikitext", "roam"]
    assert {k["name"] for k in data["skipped"]} == {"pretrain/fineweb_edu", "pretrain/gutenberg"}


def test_a_budget_cut_last_document_counts(tmp_path):
    from niels_gpt.token_files import TOKEN_DTYPE

    path = tmp_path / "shard_00000.bin"
    np.array([7, 8, 4, 4, 9, 9, 9, 4, 5, 6], dtype=TOKEN_DTYPE).tofile(path)  # eot = 4; the last doc is cut
    got = stats.document_stats([path], eot=4)
    assert (got["tokens"], got["documents"], got["empty"]) == (10, 4, 1)
    assert got["length_hist"] == stats.length_histogram([2, 3, 2]).tolist()


def test_budgets_come_from_meta(report_tree):
    roam = by_name(stats.pretrain_family(report_tree)["sources"], "roam")
    assert roam["splits"]["train"]["budget"] is None and roam["splits"]["train"]["documents"] == len(ROAM_TRAIN)


def test_sft_numbers_match_meta_info_and_the_dataset(report_tree):
    data = stats.sft_family(report_tree, {"primer": 0.1, "oasst1": 0.7, "dolly15k": 0.2})
    primer = by_name(data["sources"], "primer")
    meta = json.loads((report_tree / "sft" / "primer" / "meta.json").read_text())
    rows, _, _ = collect_info(report_tree / "sft" / "primer")
    for split in ("train", "val"):
        got = primer["splits"][split]
        info = next(r for r in rows if r.split == split)
        assert (got["examples"], got["tokens"], got["labels"]) == (info.units, info.tokens, info.extra["labels"])
        assert got["cut"] == sum(info.extra["cut"].values())
        ds = SFTExampleDataset.from_cache_dir(report_tree / "sft" / "primer", split, T=primer["t_max"])
        _, _, y_masked = ds.rows(np.arange(len(ds)))
        assert got["kept_targets"] == int((y_masked != -100).sum())
    assert primer["splits"]["train"]["cut"] == meta["splits"]["train"]["num_truncated"] > 0
    mix = data["mix"]
    assert mix["primer"]["implied_share"] == 1.0 and mix["oasst1"]["implied_share"] == 0.0  # only primer is built
    assert {k["name"] for k in data["skipped"]} == {"sft/dolly15k", "sft/oasst1"}


def test_mixture_shares_weigh_content_per_row():
    got = stats.mixture_shares({"a": 0.5, "b": 0.5}, {"a": 10.0, "b": 30.0}, {"a": 100, "b": 300})
    assert got["a"] == {"weight": 0.5, "implied_share": 0.25, "cache_share": 0.25}
    assert got["b"]["implied_share"] == 0.75


# Three SFT caches whose examples differ in count and length: (train examples, words per answer).
THREE_SFT = {"primer": (8, 1), "oasst1": (4, 12), "dolly15k": (6, 5)}


@pytest.fixture(scope="module")
def three_sft_tree(tmp_path_factory, tiny_tokenizer, tiny_tokenizer_path):
    root = tmp_path_factory.mktemp("three_sft") / "cache"
    install_tokenizer(root, tiny_tokenizer_path)
    for source, (examples, words) in THREE_SFT.items():
        chat = [{"role": "user", "content": "the river"}, {"role": "assistant", "content": " ".join(["stone"] * words)}]
        build_sft_cache(
            [chat] * examples, sft_dir(root, source), tokenizer=tiny_tokenizer, val_frac=0.0, seed=0, t_max=512,
            source=source, num_threads=1,
        )  # fmt: skip
    return root


def test_sft_mixture_shares_of_three_sources_weigh_targets_per_example(three_sft_tree):
    weights = {"primer": 0.5, "oasst1": 0.3, "dolly15k": 0.2}
    mix = stats.sft_family(three_sft_tree, weights)["mix"]
    targets = {}  # the loss-active targets of each train split, as the dataset reads them
    for source, (examples, _) in THREE_SFT.items():
        ds = SFTExampleDataset.from_cache_dir(sft_dir(three_sft_tree, source), "train", T=512)
        _, _, y_masked = ds.rows(np.arange(len(ds)))
        assert len(ds) == examples
        targets[source] = int((y_masked != -100).sum())
    # A row draws its source by weight, then examples of it uniformly: source k brings weight_k x
    # (targets_k / examples_k) targets per row; its share is that over the sum of the three.
    per_row = {k: weights[k] * targets[k] / THREE_SFT[k][0] for k in weights}
    for k in weights:
        assert mix[k]["weight"] == weights[k]
        assert mix[k]["implied_share"] == pytest.approx(per_row[k] / sum(per_row.values()), rel=1e-12)
        assert mix[k]["cache_share"] == pytest.approx(targets[k] / sum(targets.values()), rel=1e-12)
    assert mix["oasst1"]["implied_share"] > mix["primer"]["implied_share"]  # long answers outweigh a larger weight


def test_bytes_per_token_and_vocabulary_use_come_from_ids_alone(report_tree, tiny_tokenizer):
    data = stats.tokenizer_family(report_tree, tiny_tokenizer.piece_bytes())
    wiki = by_name(data["caches"], "pretrain/wikitext")
    val = wiki["splits"]["val"]
    assert val["bytes"] == sum(len(d.encode()) for d in WIKI_VAL)
    assert val["ordinary_tokens"] == sum(len(tiny_tokenizer.encode(d)) for d in WIKI_VAL)
    assert val["tokens"] == val["ordinary_tokens"] + len(WIKI_VAL)  # + one eot per document
    ids = np.concatenate([tiny_tokenizer.encode(d) for d in WIKI_TRAIN + WIKI_VAL] + [[tiny_tokenizer.eot_id]])
    assert wiki["ids_used"] == len(np.unique(ids))
    assert data["vocab_size"] == tiny_tokenizer.vocab_size
    assert [c["name"] for c in data["caches"]] == ["pretrain/wikitext", "pretrain/roam", "sft/primer"]


def test_stream_shares_are_byte_shares(report_tree):
    data = stats.streams_family(report_tree, {"wiki": 0.5, "roam": 0.5, "primer": 0.0})
    wiki = by_name(data["streams"], "wiki")
    assert wiki["splits"]["val"] == len("\n\n".join(WIKI_SEGMENTS["val"]).encode())
    roam = by_name(data["streams"], "roam")
    total = wiki["splits"]["train"] + roam["splits"]["train"]
    assert data["mix"]["wiki"]["cache_share"] == wiki["splits"]["train"] / total
    assert data["mix"]["primer"] == {"weight": 0.0, "implied_share": 0.0, "cache_share": 0.0}
