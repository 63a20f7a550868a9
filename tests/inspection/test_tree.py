"""The cache-tree walker (tree.py): what a path names, each artifact's family, splits and files."""

from __future__ import annotations

import shutil

import pytest

from niels_gpt.inspection.tree import find_artifacts, list_artifacts, stray_tmp_files, stream_artifact
from niels_gpt.layout import FAMILIES
from tests.support.cache_tree import edit_meta

TREE = [  # (name, kind, source, splits) of build_tree's artifacts, in layout order
    ("tokenizer", "tokenizer", None, ()),
    ("pretrain/off", "pretrain", "off", ("train", "val")),
    ("pretrain/x", "pretrain", "x", ("train", "val")),
    ("sft/y", "sft", "y", ("train", "val")),
    ("streams/wiki_train", "streams", "wiki", ("train",)),
    ("streams/wiki_val", "streams", "wiki", ("val",)),
]


def test_the_root_lists_every_artifact_in_layout_order_with_its_family(tree):
    selection = find_artifacts(tree)
    assert selection.root == tree and selection.whole_tree and selection.split is None
    assert [(a.name, a.kind, a.source, a.splits) for a in selection.artifacts] == TREE
    assert selection.artifacts == list_artifacts(tree)
    for a in selection.artifacts:
        assert a.family is FAMILIES[a.kind] and a.kind == a.read_meta()["kind"]


def test_files_are_the_split_files_on_disk(tree):
    arts = {a.name: a for a in list_artifacts(tree)}
    shards = sorted((tree / "pretrain/x/train").glob("shard_*.bin"))
    assert [s.path for s in arts["pretrain/x"].files("train")] == shards and len(shards) >= 3
    assert arts["pretrain/off"].files("val") == []  # a not-built cache has no shards
    assert arts["sft/y"].files("val") == [tree / "sft/y/val_tokens.bin"]
    assert arts["sft/y"].offsets("val") == tree / "sft/y/val_idx.npy"
    assert arts["streams/wiki_val"].files("val") == [tree / "streams/wiki_val.bin"]
    assert arts["tokenizer"].files("train") == []


@pytest.mark.parametrize(
    "path, names, split",
    [
        ("pretrain", ["pretrain/off", "pretrain/x"], None),
        ("sft", ["sft/y"], None),
        ("streams", ["streams/wiki_train", "streams/wiki_val"], None),
        ("tokenizer", ["tokenizer"], None),
        ("tokenizer/spm.model", ["tokenizer"], None),
        ("pretrain/x", ["pretrain/x"], None),
        ("pretrain/x/meta.json", ["pretrain/x"], None),
        ("pretrain/x/val", ["pretrain/x"], "val"),
        ("pretrain/x/train/shard_00001.bin", ["pretrain/x"], "train"),
        ("sft/y", ["sft/y"], None),
        ("sft/y/val_tokens.bin", ["sft/y"], "val"),
        ("sft/y/train_idx.npy", ["sft/y"], "train"),
        ("streams/wiki_val.bin", ["streams/wiki_val"], None),
        ("streams/wiki_train.meta.json", ["streams/wiki_train"], None),
    ],
)
def test_each_path_names_its_artifacts_and_split(tree, path, names, split):
    selection = find_artifacts(tree / path)
    assert [a.name for a in selection.artifacts] == names
    assert (selection.split, selection.root, selection.whole_tree) == (split, tree, False)


def test_kind_is_read_from_meta_not_guessed_from_the_files(tree, tmp_path):
    lone = tmp_path / "lone"
    shutil.copytree(tree / "sft" / "y", lone)
    (art,) = find_artifacts(lone).artifacts
    assert (art.kind, art.name, art.source) == ("sft", "sft/lone", "lone")
    edit_meta(lone / "meta.json", kind="pretrain")  # files of an SFT cache, but meta says pretrain
    assert find_artifacts(lone).artifacts[0].kind == "pretrain"
    edit_meta(lone / "meta.json", kind=None)  # no kind, and no family folder to fall back on
    with pytest.raises(ValueError, match="not a cache folder"):
        find_artifacts(lone)


def test_a_missing_or_damaged_meta_falls_back_on_the_family_folder(tree):
    (tree / "sft/y/meta.json").write_text("{not json")
    (tree / "pretrain/x/meta.json").unlink()
    arts = {a.name: a.kind for a in list_artifacts(tree)}
    assert arts["sft/y"] == "sft" and arts["pretrain/x"] == "pretrain"
    assert [a.kind for a in find_artifacts(tree / "pretrain" / "x").artifacts] == ["pretrain"]


def test_a_pretrain_cache_outside_a_tree_is_found_by_its_meta(tree, tmp_path):
    shutil.copytree(tree / "pretrain" / "x", tmp_path / "merged")
    selection = find_artifacts(tmp_path / "merged")
    assert [(a.kind, a.name) for a in selection.artifacts] == [("pretrain", "pretrain/merged")]
    assert selection.root is None
    assert find_artifacts(tmp_path / "merged" / "val").split == "val"


@pytest.mark.parametrize(
    "stem, source, split",
    [("wiki_train", "wiki", "train"), ("my_notes_val", "my_notes", "val"), ("odd", "odd", None), ("val", "val", None)],
)
def test_a_stream_name_is_its_source_and_split(tmp_path, stem, source, split):
    art = stream_artifact(tmp_path, stem)
    assert (art.kind, art.name, art.source, art.split) == ("streams", f"streams/{stem}", source, split)
    assert (art.path.name, art.meta_path.name) == (f"{stem}.bin", f"{stem}.meta.json")


def test_a_streams_folder_outside_a_tree(tree, tmp_path):
    shutil.copytree(tree / "streams", tmp_path / "bytes")
    selection = find_artifacts(tmp_path / "bytes")
    assert [a.name for a in selection.artifacts] == ["streams/wiki_train", "streams/wiki_val"]
    assert selection.root is None


def test_temporary_files_are_never_artifacts_but_are_listed_as_strays(tree):
    tmp = tree / "pretrain/x/train/shard_00009.bin.tmp"
    tmp.write_bytes(b"\0\0")
    stream_tmp = tree / "streams/wiki_val.bin.tmp"
    stream_tmp.write_bytes(b"x")
    with pytest.raises(ValueError, match="a temporary file of an unfinished build"):
        find_artifacts(tmp)
    assert stray_tmp_files(find_artifacts(tree)) == [tmp, stream_tmp]
    assert stray_tmp_files(find_artifacts(tree / "pretrain" / "x")) == [tmp]
    assert stray_tmp_files(find_artifacts(tree / "streams" / "wiki_train.bin")) == []
    assert stray_tmp_files(find_artifacts(tree / "streams" / "wiki_val.bin")) == [stream_tmp]


def test_paths_that_are_no_cache_say_how_to_build(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such cache; build it with `snakemake"):
        find_artifacts(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="not a cache folder"):
        find_artifacts(tmp_path / "empty")
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(ValueError, match="not a cache file"):
        find_artifacts(tmp_path / "notes.txt")


def test_a_tree_without_a_tokenizer_still_lists_it(tmp_path):
    (tmp_path / "cache" / "sft").mkdir(parents=True)
    assert [a.name for a in list_artifacts(tmp_path / "cache")] == ["tokenizer"]
    assert not list_artifacts(tmp_path / "cache")[0].meta_path.exists()
