"""What the sources of one MixedLoader must share (fields, T, device, tokenizer, ignore_index), and opening
them from a cache tree: weighted sources only, a missing or unbuilt cache refused with the fix."""

from __future__ import annotations

import json
import shutil
import types

import pytest
import torch

from niels_gpt.layout import FORMAT_VERSION
from niels_gpt.meta import not_built, write_meta
from niels_gpt.pretrain.dataset import PretrainTokenStreamDataset
from niels_gpt.sft.dataset import SFTExampleDataset
from niels_gpt.sft.writer import build_sft_cache
from niels_gpt.tokenizer import train_sentencepiece
from niels_gpt.training.loader import MixedLoader
from niels_gpt.training.sources import (
    check_same_tokenizer,
    common_ignore_index,
    open_weighted,
    probe,
    refuse_not_built,
)
from tests.support.chats import random_chats
from tests.support.corpus import tiny_corpus

SFT_P = {"primer": 0.10, "oasst1": 0.70, "dolly15k": 0.20}  # the SFT sources of loader_caches
T, B = 16, 8


def source(arity: int = 2, shape: tuple = (1, T), **attributes):
    """A source whose get_batch returns `arity` zero tensors of `shape`, and records each call's B."""
    calls = []

    def get_batch(*, B, generator):
        calls.append(B)
        return tuple(torch.zeros(shape, dtype=torch.int64) for _ in range(arity))

    return types.SimpleNamespace(get_batch=get_batch, calls=calls, **attributes)


# -- fields, T and device ------------------------------------------------------------------------


@pytest.mark.parametrize("arity", [2, 3, 5])
def test_probe_gives_the_shared_field_count_T_and_device_from_one_row_each(arity):
    sources = {"a": source(arity), "b": source(arity)}
    assert probe(sources) == (arity, T, torch.device("cpu"))
    assert sources["a"].calls == sources["b"].calls == [1]


@pytest.mark.parametrize(
    "returned, kind",
    [(torch.zeros((1, T)), "Tensor"), ([torch.zeros((1, T)), [0] * T], "list"), (None, "NoneType")],
)
def test_a_source_that_returns_no_tuple_of_tensors_is_refused(returned, kind):
    odd = types.SimpleNamespace(get_batch=lambda *, B, generator: returned)
    with pytest.raises(TypeError) as e:
        probe({"fine": source(), "odd": odd})
    assert str(e.value) == f"source 'odd': get_batch must return a tuple of tensors, got {kind}"


def test_rows_of_another_T_or_not_one_by_T_are_refused_with_each_shape():
    with pytest.raises(ValueError) as e:
        probe({"a": source(shape=(1, T)), "b": source(shape=(1, T + 1))})
    assert str(e.value) == (
        "sources of one loader need (1, T) rows with the same T and device, got "
        f"{{'a': 'shape (1, {T}) on cpu', 'b': 'shape (1, {T + 1}) on cpu'}}"
    )
    with pytest.raises(ValueError, match=r"need \(1, T\) rows.*'a': 'shape \(16,\) on cpu'"):
        probe({"a": source(shape=(T,)), "b": source(shape=(T,))})


def test_sources_returning_different_fields_are_refused_naming_what_each_returns():
    with pytest.raises(ValueError) as e:
        probe({"bytes": source(2), "chat": source(3)})
    assert str(e.value) == (
        "sources of one loader must all return the same fields; by source: {'bytes': '(x, y)', 'chat': "
        "'(x, y, y_masked)'}. Mix pretrain / byte sources and SFT sources in separate loaders"
    )
    with pytest.raises(ValueError, match=r"'packed \(x, y, y_masked, segment_ids, position_ids\)'}\. Mix pretrain"):
        probe({"bytes": source(2), "packed": source(5)})
    with pytest.raises(ValueError, match=r"by source: \{'a': '4 tensors', 'b': '4 tensors'\}"):
        probe({"a": source(4), "b": source(4)})  # a count no source kind returns


def test_arity_mismatch_is_refused(loader_caches):
    sources = {
        "fineweb_edu": PretrainTokenStreamDataset(loader_caches / "pretrain/fineweb_edu/train", T=T),
        "dolly15k": SFTExampleDataset.from_cache_dir(loader_caches / "sft/dolly15k", T=T),
    }
    arity = r"must all return the same fields.*'dolly15k': '\(x, y, y_masked\)', 'fineweb_edu': '\(x, y\)'"
    with pytest.raises(ValueError, match=arity):
        MixedLoader(sources, p={"fineweb_edu": 0.5, "dolly15k": 0.5}, B=B, seed=0)


def test_different_T_is_refused(loader_caches):
    sources = {
        "a": PretrainTokenStreamDataset(loader_caches / "pretrain/wikitext/train", T=T),
        "b": PretrainTokenStreamDataset(loader_caches / "pretrain/gutenberg/train", T=T + 1),
    }
    with pytest.raises(ValueError, match="same T and device"):
        MixedLoader(sources, p={"a": 0.5, "b": 0.5}, B=B, seed=0)


def test_packed_and_padded_sources_are_refused_in_one_loader(packable_caches):
    sources = {
        "dolly15k": SFTExampleDataset.from_cache_dir(packable_caches / "sft/dolly15k", T=T),
        "oasst1": SFTExampleDataset.from_cache_dir(packable_caches / "sft/oasst1", T=T, packing=True),
    }
    with pytest.raises(ValueError) as e:
        MixedLoader(sources, p={"dolly15k": 0.3, "oasst1": 0.7}, B=B, seed=0)
    assert str(e.value) == (
        "packed and padded SFT sources cannot be mixed in one loader ({'dolly15k': '(x, y, y_masked)', 'oasst1': "
        "'packed (x, y, y_masked, segment_ids, position_ids)'}): a batch is either packed rows with segment_ids "
        "and position_ids or one example per row; open every SFT source with packing=True "
        "(MixedLoader.sft(..., packing=True)) or none"
    )


# -- tokenizer and ignore_index ------------------------------------------------------------------


def test_sources_without_a_tokenizer_sha256_are_not_compared():
    built = source(meta={"tokenizer_sha256": "a" * 64})
    check_same_tokenizer({"x": built, "y": source(meta={"tokenizer_sha256": "a" * 64})})
    check_same_tokenizer({"x": built, "bytes": source(meta={"tokenizer_sha256": None}), "plain": source()})
    with pytest.raises(ValueError, match="different tokenizers"):
        check_same_tokenizer({"x": built, "y": source(meta={"tokenizer_sha256": "b" * 64})})


def test_caches_of_different_tokenizers_are_refused_naming_each_sha256(loader_caches, tiny_tokenizer, tmp_path):
    other = train_sentencepiece(tiny_corpus(200, seed=9), tmp_path / "other.model", vocab_size=380, num_threads=1)
    root = tmp_path / "cache"
    shutil.copytree(loader_caches / "sft", root / "sft")
    shutil.rmtree(root / "sft" / "primer")
    build_sft_cache(random_chats(30, seed=2), str(root / "sft" / "primer"), tokenizer=other, val_frac=0.1, seed=0)
    with pytest.raises(ValueError) as e:
        MixedLoader.sft(root, p=SFT_P, T=T, B=B, seed=0)
    shas = {"dolly15k": tiny_tokenizer.sha256, "oasst1": tiny_tokenizer.sha256, "primer": other.sha256}
    assert str(e.value) == (
        f"caches of one loader were built with different tokenizers (sha256 by source: {shas}); "
        "rebuild them with one tokenizer"
    )
    assert MixedLoader.sft(root, p={"primer": 1.0}, T=T, B=B, seed=0).names == ["primer"]  # alone it is fine


def test_the_ignore_index_is_the_sft_sources_one_and_none_without_them():
    assert common_ignore_index({"a": source(), "b": source()}) is None
    assert common_ignore_index({"bytes": source(), "chat": source(ignore_index=-1)}) == -1
    assert common_ignore_index({"c": source(ignore_index=-100), "d": source(ignore_index=-100)}) == -100
    with pytest.raises(ValueError) as e:
        common_ignore_index({"c": source(ignore_index=-100), "d": source(ignore_index=-1)})
    assert str(e.value) == "SFT sources of one loader need one ignore_index, got {'c': -100, 'd': -1}"


# -- opening sources from a cache tree -----------------------------------------------------------


def built_meta(folder) -> None:
    folder.mkdir(parents=True)
    (folder / "meta.json").write_text(json.dumps({"built": True}))


def test_only_weighted_sources_are_opened_in_name_order(tmp_path):
    for name in ("b", "a"):
        built_meta(tmp_path / name)
    opened = []

    def open_source(root):
        opened.append(root)
        return root.name

    p = {"b": 0.75, "zero": 0.0, "a": 0.25}  # "zero" has no folder at all: never looked at
    assert open_weighted(p, lambda cache_dir, name: cache_dir / name, tmp_path, open_source) == {"a": "a", "b": "b"}
    assert opened == [tmp_path / "a", tmp_path / "b"]
    with pytest.raises(ValueError, match=r"loader mixture p must sum to 1"):
        open_weighted({"a": 0.25, "b": 0.5}, lambda cache_dir, name: cache_dir / name, tmp_path, open_source)
    assert len(opened) == 2


def test_a_weighted_source_without_meta_is_refused_with_the_path(loader_caches, tmp_path):
    root = tmp_path / "cache"
    shutil.copytree(loader_caches / "pretrain", root / "pretrain")
    (root / "pretrain" / "wikitext" / "meta.json").unlink()  # a build that never finished
    p = {"fineweb_edu": 0.6, "wikitext": 0.3, "gutenberg": 0.1}
    with pytest.raises(FileNotFoundError) as e:
        MixedLoader.pretrain(root, p=p, T=T, B=B, seed=7)
    assert str(e.value) == (
        f"{root}/pretrain/wikitext/meta.json: no meta.json for source 'wikitext' (weight 0.3); build the cache "
        "first (`snakemake -j4 cache/all`) or give it weight 0"
    )
    unweighted = {"fineweb_edu": 0.7, "gutenberg": 0.3, "wikitext": 0.0}
    assert MixedLoader.pretrain(root, p=unweighted, T=T, B=B, seed=7).names == ["fineweb_edu", "gutenberg"]


def test_a_source_that_was_not_built_is_refused_with_its_reason(tmp_path):
    folder = tmp_path / "roam"
    folder.mkdir()
    meta = not_built("pretrain", reason="sources.roam.enabled is false", format_version=FORMAT_VERSION, seed=0)
    write_meta(folder / "meta.json", meta)
    with pytest.raises(ValueError) as e:
        refuse_not_built(folder, "roam", 0.25)
    assert str(e.value) == (
        f"{folder}: source 'roam' has weight 0.25 but its cache was not built (sources.roam.enabled is false); "
        "enable sources.roam.enabled and rebuild, or give it weight 0"
    )
    (folder / "meta.json").write_text(json.dumps({"built": False}))
    with pytest.raises(ValueError, match=r"was not built \(no reason given\)"):
        refuse_not_built(folder, "roam", 0.25)
    (folder / "meta.json").write_text(json.dumps({"train_tokens": 5}))  # a record without `built` is built
    refuse_not_built(folder, "roam", 0.25)
