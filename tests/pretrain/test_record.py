"""What a pretrain meta.json records beyond its shards (pretrain/record.py): the shard format, the source's
provenance read after the input, the cleaning counts, the split rule of a pre-split source, and the
refusal of a split left empty by accident."""

from __future__ import annotations

import pytest

from niels_gpt.pretrain.record import (
    DOCUMENT_SEPARATOR,
    ON_PURPOSE,
    PRESPLIT_RULE,
    STREAMING_DETERMINISM,
    EmptySplitError,
    add_counts,
    check_splits_filled,
    cleaning_record,
    presplit_rule,
    shard_format,
    source_meta,
)


def test_shard_format():
    assert shard_format(4096) == {
        "token_dtype": "uint16-le",
        "document_separator": DOCUMENT_SEPARATOR,
        "shard_bytes": 4096,
    }


def test_source_meta_takes_the_hub_record_of_what_the_loader_opened():
    provenance = {
        "source": "fineweb_edu",
        "stream": {"dataset_id": "a/b", "config": "c", "revision": "r1", "streaming": True},
    }
    meta = source_meta(dataset_name=None, dataset_config=None, provenance=provenance)
    assert meta == {
        "dataset_name": "a/b",
        "dataset_config": "c",
        "dataset_revision": "r1",
        "streaming": True,
        "determinism": STREAMING_DETERMINISM,
        "provenance": provenance,
    }
    assert meta["provenance"] is not provenance  # a copy: the loader's dict may change later
    named = source_meta(dataset_name="mine", dataset_config="x", provenance=provenance)
    assert (named["dataset_name"], named["dataset_config"]) == ("mine", "x")


def test_source_meta_of_a_local_source():
    meta = source_meta(dataset_name="roam", dataset_config=None, provenance=None)
    assert meta["streaming"] is False and meta["determinism"].startswith("exact")
    assert (meta["dataset_revision"], meta["provenance"]) == (None, {})
    presplit = {"train": {"dataset_id": "w/t", "revision": "r2"}, "revision_requested": "main"}
    assert source_meta(dataset_name=None, dataset_config=None, provenance=presplit)["dataset_revision"] == "r2"


def test_cleaning_adds_the_writer_and_loader_counts():
    provenance = {
        "cleaning": {"stripped": 1},
        "stream": {"cleaning": {"stripped": 2, "chars": 10}},
        "train": None,
        "val": {"cleaning": {"chars": 5}},
    }
    assert cleaning_record(provenance, 3) == {"skipped_blank": 3, "stripped": 3, "chars": 15}
    assert add_counts([{"a": 1}, None, {"b": 2, "a": 3}]) == {"a": 4, "b": 2}


def test_presplit_rule_names_the_source_splits():
    assert presplit_rule({}) == PRESPLIT_RULE
    provenance = {"train": {"split": "train"}, "val": {"split": "validation"}, "split_rule": "by file"}
    assert presplit_rule(provenance) == (
        PRESPLIT_RULE + " (train = source split 'train'; val = source split 'validation'; by file)"
    )


def test_an_empty_split_is_refused_unless_its_budget_is_zero():
    fill = dict(source="wikitext", read={"train": 7, "val": 3}, blank={"train": 0, "val": 3})
    with pytest.raises(EmptySplitError) as err:
        check_splits_filled({"train": 5, "val": 0}, {"train": None, "val": 10}, split_setting="x.val_split='v'", **fill)
    assert str(err.value) == (
        "wikitext: the val split would hold 0 tokens (documents read: 3, blank: 3; split by x.val_split='v'). "
        "To fix: change x.val_split so val gets documents, or set sources.wikitext.max_val_tokens: 0 to build "
        "without val on purpose"
    )
    with pytest.raises(EmptySplitError, match=r"^a/b: the train split .* To fix: give the source text for train"):
        check_splits_filled(
            {"train": 0, "val": 1}, {"train": 9, "val": 1}, **{**fill, "source": "a/b"}, split_setting="p=0.1"
        )
    check_splits_filled({"train": 5, "val": 0}, {"train": None, "val": 0}, split_setting="p=0", **fill)
    assert ON_PURPOSE.format(split="val") == "max_val_tokens is 0: built without val on purpose"
