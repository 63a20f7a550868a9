"""shard_list.py: a pretrain split's files as its meta.json lists them (one job's, or a manifest's parts')."""

from __future__ import annotations

import json

import numpy as np
import pytest

from niels_gpt.shard_list import is_manifest, manifest_problems, split_shards, unlisted_shards
from niels_gpt.token_files import DiskSequence


def shard(path, ids):
    path.parent.mkdir(parents=True, exist_ok=True)
    np.asarray(ids, dtype="<u2").tofile(path)
    return {"tokens": len(ids), "sha256": "x"}


def test_one_job_cache_lists_files_of_the_split_folder_and_names_unlisted_ones(tmp_path):
    a = shard(tmp_path / "train" / "shard_00000.bin", [1, 2])
    meta = {"eot_id": 4, "shards": {"train": [{"file": "shard_00000.bin", **a}], "val": []}}
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    (got,) = split_shards(tmp_path, "train")
    assert (got.path, got.name, got.listed, got.tokens, got.part, got.last_id) == (
        tmp_path / "train" / "shard_00000.bin", "train/shard_00000.bin", "shard_00000.bin", 2, None, None
    )  # fmt: skip
    assert split_shards(tmp_path, "val") == [] and not is_manifest(meta)
    shard(tmp_path / "train" / "shard_00001.bin", [3])  # a stale shard beside them
    assert unlisted_shards(tmp_path, "train", [got]) == ["train/shard_00001.bin"]
    assert manifest_problems(tmp_path, meta) == []


def test_without_meta_the_split_folder_is_read_and_a_missing_one_is_an_error(tmp_path):
    shard(tmp_path / "train" / "shard_00001.bin", [3])
    shard(tmp_path / "train" / "shard_00000.bin", [1, 2])
    assert [s.listed for s in split_shards(tmp_path, "train")] == ["shard_00000.bin", "shard_00001.bin"]
    assert all(s.tokens is None for s in split_shards(tmp_path, "train"))
    with pytest.raises(NotADirectoryError, match="no such shard directory"):
        split_shards(tmp_path, "val")


def test_a_manifest_lists_part_files_relative_to_the_source_with_the_boundary_eot(tmp_path):
    a = shard(tmp_path / "parts/part_000/train/shard_00000.bin", [7, 8, 9])
    b = shard(tmp_path / "parts/part_001/train/shard_00000.bin", [5, 4])
    meta = {
        "eot_id": 4,
        "shards": {
            "train": [
                {"path": "parts/part_000/train/shard_00000.bin", "part": 0, "end_eot": True, **a},
                {"path": "parts/part_001/train/shard_00000.bin", "part": 1, **b},
            ],
            "val": [],
        },
    }
    shards = split_shards(tmp_path, "train", meta)
    assert is_manifest(meta) and not (tmp_path / "train").exists()
    assert [(s.name, s.part, s.last_id) for s in shards] == [
        ("parts/part_000/train/shard_00000.bin", 0, 4),
        ("parts/part_001/train/shard_00000.bin", 1, None),
    ]
    seq = DiskSequence(shards)
    assert seq.read(0, len(seq)).tolist() == [7, 8, 4, 5, 4]  # the cut document ends in eot
    assert unlisted_shards(tmp_path, "train", shards) == []


def test_manifest_problems_name_a_part_whose_meta_changed_or_went(tmp_path):
    for k in (0, 1):
        (tmp_path / f"parts/part_00{k}").mkdir(parents=True)
        (tmp_path / f"parts/part_00{k}/meta.json").write_text("{}")
    from niels_gpt.hashing import sha256_file

    sha = sha256_file(tmp_path / "parts/part_000/meta.json")
    meta = {
        "shards": {"train": [{"path": "parts/part_000/train/shard_00000.bin"}]},
        "parts": [
            {"index": 0, "meta": "parts/part_000/meta.json", "meta_sha256": sha},
            {"index": 1, "meta": "parts/part_001/meta.json", "meta_sha256": sha},
        ],
    }
    assert manifest_problems(tmp_path, meta) == []
    (tmp_path / "parts/part_001/meta.json").write_text('{"rebuilt": true}')
    (tmp_path / "parts/part_000/meta.json").unlink()
    problems = manifest_problems(tmp_path, meta)
    assert problems[0] == "parts/part_000/meta.json: missing (part 0 of the manifest); rebuild that part"
    assert (
        problems[1].startswith("parts/part_001/meta.json: sha256 ")
        and "part 1 was rebuilt after the merge" in problems[1]
    )
