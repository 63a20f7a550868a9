"""The splits the report reads (corpora.py): registry order, family words, what is left out and why, units."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from niels_gpt.layout import FAMILIES
from niels_gpt.report.corpora import EXCERPT_CHARS, excerpt, find_splits
from tests.support.cache_tree import STREAM_SEP, WIKI_SEGMENTS, WIKI_VAL


@pytest.fixture
def tree_copy(report_tree, tmp_path):
    """A copy of the report tree that a test may change."""
    return shutil.copytree(report_tree, tmp_path / "cache")


def by_name(splits, name: str, split: str):
    return next(s for s in splits if (s.name, s.split) == (name, split))


def test_splits_come_in_registry_order_with_their_family_words(report_tree):
    splits, _ = find_splits(report_tree)
    names = ["pretrain/wikitext", "pretrain/roam", "sft/primer", "streams/wiki", "streams/roam"]
    assert [(s.name, s.split) for s in splits] == [(n, split) for n in names for split in ("train", "val")]
    for s in splits:
        family = FAMILIES[s.family]
        assert (s.space, s.unit) == (family.space, family.unit) and s.artifact.kind == s.family
        assert s.meta["kind"] == s.family and s.files == tuple(s.artifact.files(s.split))


def test_what_is_left_out_is_listed_with_the_reason(report_tree):
    _, skipped = find_splits(report_tree)
    reasons = {k["name"]: k["reason"] for k in skipped}
    assert set(reasons) == {
        "pretrain/fineweb_edu",
        "pretrain/gutenberg",
        "sft/dolly15k",
        "sft/oasst1",
        "streams/primer",
    }
    assert reasons["pretrain/gutenberg"] == "not built: sources.gutenberg.enabled is false"
    assert reasons["sft/oasst1"] == f"{report_tree}/sft/oasst1/meta.json not found"
    assert reasons["streams/primer"] == (
        f"{report_tree}/streams/primer_train.meta.json not found (not in streams.enabled_sources?)"
    )


def test_a_missing_or_empty_split_is_named_by_itself(tree_copy):
    (tree_copy / "streams" / "roam_val.meta.json").unlink()
    (tree_copy / "streams" / "wiki_train.bin").write_bytes(b"")
    splits, skipped = find_splits(tree_copy)
    reasons = {k["name"]: k["reason"] for k in skipped}
    assert reasons["streams/roam val"].endswith(
        "streams/roam_val.meta.json not found (not in streams.enabled_sources?)"
    )
    assert reasons["streams/wiki train"] == "empty"
    assert ("streams/roam", "train") in {(s.name, s.split) for s in splits}


def test_a_cache_dir_that_does_not_exist_leaves_everything_out(tmp_path):
    splits, skipped = find_splits(tmp_path / "nothing")
    assert splits == [] and len(skipped) == 4 + 3 + 3
    assert all(k["reason"].endswith("not found") or "not in streams.enabled_sources" in k["reason"] for k in skipped)


def test_units_are_documents_examples_and_segments(report_tree, tiny_tokenizer):
    splits, _ = find_splits(report_tree)
    wiki = by_name(splits, "pretrain/wikitext", "val")
    data = wiki.sequence().read(0, len(wiki.sequence()))
    starts, ends = wiki.unit_bounds(data)
    assert [data[a:b].tolist() for a, b in zip(starts, ends)] == [tiny_tokenizer.encode(d) for d in WIKI_VAL]

    primer = by_name(splits, "sft/primer", "train")
    data = primer.sequence().read(0, len(primer.sequence()))
    starts, ends = primer.unit_bounds(data)
    assert starts.tolist() == np.load(primer.artifact.offsets("train")).tolist() and ends[-1] == len(data)

    stream = by_name(splits, "streams/wiki", "val")
    data = stream.sequence().read(0, len(stream.sequence()))
    starts, ends = stream.unit_bounds(data)
    segments = [data[a:b].tobytes().decode() for a, b in zip(starts, ends)]
    assert segments == WIKI_SEGMENTS["val"] and data.tobytes().decode() == STREAM_SEP.join(segments)


def test_special_ids_are_left_out_of_token_splits_only(report_tree, tiny_tokenizer):
    splits, _ = find_splits(report_tree)
    assert by_name(splits, "sft/primer", "val").special_ids() == sorted(tiny_tokenizer.special_ids.values())
    assert by_name(splits, "streams/wiki", "val").special_ids() == []


def test_an_excerpt_is_one_short_line_from_the_start_of_its_unit(report_tree, tiny_tokenizer):
    splits, _ = find_splits(report_tree)
    wiki = by_name(splits, "pretrain/wikitext", "val")
    data = wiki.sequence().read(0, len(wiki.sequence()))
    starts, ends = wiki.unit_bounds(data)
    text = excerpt(wiki, data, int(starts[0]), int(ends[0]), tiny_tokenizer)
    assert text and " ".join(WIKI_VAL[0].split()).startswith(text.rstrip("…"))
    assert "\n" not in text and len(text) <= EXCERPT_CHARS
    assert excerpt(wiki, data, int(starts[0]), int(ends[0])) == ""  # token units need the tokenizer
    stream = by_name(splits, "streams/wiki", "val")
    data = stream.sequence().read(0, len(stream.sequence()))
    text = excerpt(stream, data, 0, len(data))
    assert len(text) == EXCERPT_CHARS and text.endswith("…") and text[:20] == WIKI_SEGMENTS["val"][0][:20]
