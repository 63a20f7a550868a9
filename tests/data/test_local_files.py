"""local_files: the data_files forms `datasets` takes, the glob expansion and its order, the builder by
extension, and the union of parquet schemas that differ from file to file."""

from __future__ import annotations

import os

import pytest

from niels_gpt.data.fineweb_edu import iter_fineweb_edu
from niels_gpt.data.hub import HubRead, open_dataset
from niels_gpt.data.source import builder_for, data_files_by_split, expand_data_files
from niels_gpt.hashing import sha256_file
from tests.support.hub_files import write_jsonl, write_parquet


@pytest.mark.parametrize(
    "data_files, by_split",
    [
        ("a/*.parquet", {"train": ["a/*.parquet"]}),
        (["a.parquet", "b/*.parquet"], {"train": ["a.parquet", "b/*.parquet"]}),
        ({"validation": "v.parquet"}, {"validation": ["v.parquet"]}),
        (
            {"train": ["t0.parquet", "t1.parquet"], "test": "x.parquet"},
            {"train": ["t0.parquet", "t1.parquet"], "test": ["x.parquet"]},
        ),
    ],
)
def test_data_files_by_split_takes_every_form_datasets_takes(data_files, by_split):
    assert data_files_by_split(data_files) == by_split


def _rows(tmp_path):
    for name, texts in (("a.parquet", ["a0", "a1"]), ("b.parquet", ["b0"]), ("c.parquet", ["c0"])):
        write_parquet(tmp_path / name, {"text": texts})
    return tmp_path


@pytest.mark.parametrize(
    "form, texts",
    [
        ("one glob", ["a0", "a1", "b0", "c0"]),
        ("one path", ["b0"]),
        ("a list", ["c0", "a0", "a1"]),
        ("split: glob", ["a0", "a1", "b0", "c0"]),
        ("split: list", ["c0", "b0"]),
    ],
)
def test_open_dataset_reads_each_form_of_data_files(tmp_path, form, texts):
    root = _rows(tmp_path)
    data_files = {
        "one glob": str(root / "*.parquet"),
        "one path": str(root / "b.parquet"),
        "a list": [str(root / "c.parquet"), str(root / "a.parquet")],
        "split: glob": {"train": str(root / "*.parquet")},
        "split: list": {"train": [str(root / "c.parquet"), str(root / "b.parquet")]},
    }[form]
    ds = open_dataset(HubRead("org/set", data_files=data_files, streaming=True))
    assert [r["text"] for r in ds] == texts
    assert [s.text for s in iter_fineweb_edu(read=HubRead("org/set", data_files=data_files, streaming=True))] == texts


def test_a_path_given_alone_is_the_train_split_not_a_mapping(tmp_path):
    path = str(write_parquet(tmp_path / "v.parquet", {"text": ["x"]}))
    with pytest.raises(ValueError) as err:
        open_dataset(HubRead("x/y", split="validation", data_files=path))
    assert str(err.value) == "local data files for 'x/y' have no split 'validation' (splits: train)"


def test_globs_expand_in_their_order_each_sorted_each_file_once(tmp_path):
    root = _rows(tmp_path)
    files = expand_data_files([str(root / "c.parquet"), str(root / "*.parquet")], split="train", dataset_id="x")
    assert [os.path.basename(f) for f in files] == ["c.parquet", "a.parquet", "b.parquet"]
    with pytest.raises(FileNotFoundError, match=r"none-\*\.parquet: no local data files for 'x' split 'train'"):
        expand_data_files([str(root / "a.parquet"), str(root / "none-*.parquet")], split="train", dataset_id="x")


def test_local_files_read_in_sorted_order_with_sha256(tmp_path):
    write_parquet(tmp_path / "b.parquet", {"text": ["b"]})
    write_parquet(tmp_path / "a.parquet", {"text": ["a"]})
    prov = {}
    out = [
        s.text
        for s in iter_fineweb_edu(
            read=HubRead("org/set", data_files=str(tmp_path / "*.parquet"), streaming=True), provenance=prov
        )
    ]
    assert out == ["a", "b"]
    assert [os.path.basename(f["path"]) for f in prov["data_files"]] == ["a.parquet", "b.parquet"]
    assert prov["data_files"][0]["sha256"] == sha256_file(tmp_path / "a.parquet")
    assert prov["local"] is True and prov["builder"] == "parquet"


def test_builder_follows_the_extension(tmp_path):
    path = write_jsonl(tmp_path / "rows.jsonl", [{"text": "j"}])
    ds = open_dataset(HubRead("any/id", streaming=True, data_files={"train": str(path)}))
    assert [r["text"] for r in ds] == ["j"]
    with pytest.raises(ValueError, match="unsupported data file type"):
        builder_for("notes.txt")


def test_missing_local_files_name_the_glob(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nothing-\*\.parquet.*split 'train'"):
        open_dataset(HubRead("x/y", streaming=True, data_files={"train": str(tmp_path / "nothing-*.parquet")}))
    with pytest.raises(ValueError, match="no split 'validation'"):
        open_dataset(HubRead("x/y", split="validation", streaming=True, data_files={"train": "a.parquet"}))


def _table(path, columns: dict, schema=None):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table(columns, schema=schema), path)
    return path


@pytest.mark.parametrize("streaming", [True, False])
def test_fineweb_files_with_and_without_a_date_column_read_as_one_split(tmp_path, streaming):
    # the file without `date` first: datasets alone would cast the second file to its schema and fail
    _table(tmp_path / "train-00000.parquet", {"text": ["no date"], "id": ["<urn:1>"], "url": ["u1"]})
    _table(tmp_path / "train-00001.parquet", {"text": ["dated"], "id": ["<urn:2>"], "url": ["u2"], "date": ["2024"]})
    files = {"train": str(tmp_path / "*.parquet")}
    ds = open_dataset(HubRead("HuggingFaceFW/fineweb-edu", streaming=streaming, data_files=files))
    assert [(r["text"], r["date"]) for r in ds] == [("no date", None), ("dated", "2024")]
    samples = list(iter_fineweb_edu(read=HubRead("org/set", data_files=files, streaming=True)))
    assert [(s.text, s.meta["id"]) for s in samples] == [("no date", "<urn:1>"), ("dated", "<urn:2>")]


def _oasst_pair(tree: str, emojis, detoxify) -> dict:
    return {
        "message_id": [tree, tree + "-a"],
        "parent_id": [None, tree],
        "message_tree_id": [tree, tree],
        "role": ["prompter", "assistant"],
        "text": [f"question {tree}", f"answer {tree}"],
        "lang": ["en", "en"],
        "deleted": [False, False],
        "emojis": emojis,
        "detoxify": detoxify,
    }


def test_nested_columns_that_are_structs_in_one_file_and_null_in_another_read_as_one_split(tmp_path):
    import pyarrow as pa

    from niels_gpt.data.oasst1 import iter_oasst1_sft

    emojis = pa.struct([("name", pa.list_(pa.string())), ("count", pa.list_(pa.int32()))])
    detoxify = pa.struct([("toxicity", pa.float64())])
    # a flat export without annotations first: its nested columns are all null (pyarrow type null)
    _table(tmp_path / "train-00000.parquet", _oasst_pair("r", [None, None], [None, None]))
    nested = _oasst_pair(
        "s",
        pa.array([{"name": ["+1"], "count": [2]}, None], type=emojis),
        pa.array([None, {"toxicity": 0.01}], type=detoxify),
    )
    _table(tmp_path / "train-00001.parquet", nested)
    threads = list(
        iter_oasst1_sft(read=HubRead("org/set", data_files=str(tmp_path / "*.parquet")), shuffle_trees=False)
    )
    assert [[m.content for m in t.messages] for t in threads] == [
        ["question r", "answer r"],
        ["question s", "answer s"],
    ]


def test_files_whose_columns_conflict_name_the_files(tmp_path):
    _table(tmp_path / "a.parquet", {"text": ["x"], "id": ["1"]})
    _table(tmp_path / "b.parquet", {"text": ["y"], "id": [2]})
    with pytest.raises(ValueError, match=r"a\.parquet, .*b\.parquet: the files' columns cannot be read as one table"):
        open_dataset(HubRead("x/y", streaming=True, data_files={"train": str(tmp_path / "*.parquet")}))
