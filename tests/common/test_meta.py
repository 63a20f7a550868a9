"""niels_gpt.meta: the one header, the one "not built" record, required fields by kind, write/read, unpublish."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from niels_gpt import meta as meta_module
from niels_gpt.layout import FAMILIES
from niels_gpt.meta import (
    HEADER,
    KINDS,
    NOT_BUILT_REQUIRED,
    REQUIRED,
    TOKENIZER_FIELDS,
    check_required,
    header,
    is_built,
    not_built,
    read_meta,
    tokenizer_fields,
    unpublish,
    write_meta,
)


def test_the_kinds_are_the_families_of_the_cache_tree():
    assert KINDS == tuple(FAMILIES) == ("tokenizer", "pretrain", "sft", "streams")
    assert set(REQUIRED) == set(KINDS)
    assert all(fields[: len(HEADER)] == HEADER for fields in REQUIRED.values())  # every kind starts with the header


# The contract, written out here rather than read from meta.py: a field dropped from meta.REQUIRED_* must
# fail these tests, not drop out of them.
LITERAL_HEADER = (
    "kind", "format_version", "built", "seed", "dataset_name", "dataset_config", "dataset_revision",
    "tokenizer_sha256", "vocab_size", "special_token_ids", "eot_id",
)  # fmt: skip
LITERAL_REQUIRED = {
    "tokenizer": LITERAL_HEADER + ("model_file", "sha256"),
    "pretrain": LITERAL_HEADER + ("split_rule", "token_dtype", "train_tokens", "val_tokens", "shard_bytes", "shards"),
    "sft": LITERAL_HEADER + ("split_rule", "token_dtype", "train_examples", "val_examples", "files"),
    "streams": LITERAL_HEADER + ("source", "split", "n_bytes", "sha256"),
}
LITERAL_NOT_BUILT = LITERAL_HEADER + ("reason",)


def test_the_required_fields_are_the_written_contract():
    assert HEADER == LITERAL_HEADER
    assert {kind: tuple(fields) for kind, fields in REQUIRED.items()} == LITERAL_REQUIRED
    assert meta_module.REQUIRED_PRETRAIN == LITERAL_REQUIRED["pretrain"]
    assert meta_module.REQUIRED_SFT == LITERAL_REQUIRED["sft"]
    assert meta_module.REQUIRED_TOKENIZER == LITERAL_REQUIRED["tokenizer"]
    assert meta_module.REQUIRED_STREAM == LITERAL_REQUIRED["streams"]
    assert NOT_BUILT_REQUIRED == LITERAL_NOT_BUILT


@pytest.mark.parametrize("kind", list(LITERAL_REQUIRED))
def test_a_built_meta_without_any_one_contract_field_is_refused(kind):
    full = {field: 0 for field in LITERAL_REQUIRED[kind]} | {"kind": kind, "built": True}
    check_required(full)
    for field in LITERAL_REQUIRED[kind]:
        if field == "kind":
            continue  # without a kind no contract applies: test_check_required_refuses_a_meta_without_a_kind
        partial = {k: v for k, v in full.items() if k != field}
        with pytest.raises(ValueError, match=rf"missing required field\(s\) {field}$"):
            check_required(partial, path="meta.json")


def test_a_not_built_record_without_any_one_contract_field_is_refused():
    full = {field: 0 for field in LITERAL_NOT_BUILT} | {"kind": "pretrain", "built": False}
    check_required(full)
    for field in set(LITERAL_NOT_BUILT) - {"kind", "built"}:  # without built: false it is held to the built contract
        with pytest.raises(ValueError, match=rf"missing required field\(s\) {field}$"):
            check_required({k: v for k, v in full.items() if k != field})


def test_the_header_of_an_artifact_built_with_a_tokenizer(tiny_tokenizer):
    head = header(
        "sft",
        format_version=7,
        seed=3,
        tokenizer=tiny_tokenizer,
        dataset_name="d/x",
        dataset_config="c",
        dataset_revision="0" * 40,
    )
    assert head == {
        "kind": "sft",
        "format_version": 7,
        "built": True,
        "seed": 3,
        "dataset_name": "d/x",
        "dataset_config": "c",
        "dataset_revision": "0" * 40,
        "tokenizer_sha256": tiny_tokenizer.sha256,
        "vocab_size": tiny_tokenizer.vocab_size,
        "special_token_ids": dict(tiny_tokenizer.special_ids),
        "eot_id": tiny_tokenizer.eot_id,
    }
    assert tuple(head) == HEADER


def test_without_a_tokenizer_its_fields_are_none():
    head = header("streams", format_version=1, seed=None)
    assert {k: head[k] for k in TOKENIZER_FIELDS} == dict.fromkeys(TOKENIZER_FIELDS)
    assert (head["dataset_name"], head["dataset_config"], head["dataset_revision"]) == (None, None, None)


def test_tokenizer_fields_are_copied_from_the_meta_of_an_artifact_built_with_it(tiny_tokenizer):
    part = {**header("pretrain", format_version=1, seed=0, tokenizer=tiny_tokenizer), "shards": {}}
    assert tokenizer_fields(part) == tokenizer_fields(tiny_tokenizer) == {k: part[k] for k in TOKENIZER_FIELDS}
    assert header("pretrain", format_version=1, seed=0, tokenizer=part) == {k: part[k] for k in HEADER}


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match=r"unknown artifact kind 'stream'; expected one of tokenizer, pretrain"):
        header("stream", format_version=1, seed=0)


def test_the_not_built_record_is_the_header_with_built_false_and_why():
    record = not_built("pretrain", reason="sources.x.enabled is false", format_version=2, seed=1, dataset_name="x")
    assert record == {
        **header("pretrain", format_version=2, seed=1, dataset_name="x"),
        "built": False,
        "reason": "sources.x.enabled is false",
    }
    assert not is_built(record) and is_built(header("sft", format_version=1, seed=0)) and is_built({})
    check_required(record)  # a not-built record needs only the header and its reason


def test_check_required_names_the_path_and_every_missing_field():
    built = {**header("tokenizer", format_version=1, seed=0), "model_file": "spm.model"}
    with pytest.raises(ValueError, match=r"^cache/tokenizer/meta.json: missing required field\(s\) sha256$"):
        check_required(built, path="cache/tokenizer/meta.json")
    check_required({**built, "sha256": "ab"})
    record = not_built("sft", reason="off", format_version=1, seed=0)
    del record["reason"], record["eot_id"]
    with pytest.raises(ValueError, match=r"missing required field\(s\) eot_id, reason$"):
        check_required(record)
    assert set(NOT_BUILT_REQUIRED) == set(HEADER) | {"reason"}


def test_check_required_refuses_a_meta_without_a_kind_unless_given_the_fields():
    with pytest.raises(ValueError, match=r"^m.json: kind None is not an artifact kind \(tokenizer, pretrain"):
        check_required({"seed": 1}, path="m.json")
    check_required({"seed": 1}, ("seed",))
    with pytest.raises(ValueError, match=r"missing required field\(s\) vocab_size$"):
        check_required({"seed": 1}, ("seed", "vocab_size"))


def test_write_meta_checks_before_anything_is_written(tmp_path):
    with pytest.raises(ValueError, match="missing required field"):
        write_meta(tmp_path / "meta.json", header("sft", format_version=1, seed=0))
    assert list(tmp_path.iterdir()) == []
    record = not_built("sft", reason="off", format_version=1, seed=0)
    write_meta(tmp_path / "meta.json", record)
    assert read_meta(tmp_path / "meta.json") == record
    assert (tmp_path / "meta.json").read_text() == json.dumps(record, indent=2, sort_keys=True) + "\n"


def test_read_meta_says_how_to_build_a_missing_meta_and_that_a_damaged_one_is_damaged(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no meta.json - the cache was never built .*`snakemake -j4"):
        read_meta(tmp_path / "meta.json")
    (tmp_path / "meta.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"meta.json: not valid JSON"):
        read_meta(tmp_path / "meta.json")


def test_unpublish_removes_meta_first_then_the_files_and_their_temporaries(tmp_path, monkeypatch):
    for name in ("meta.json", "meta.json.tmp", "a.bin", "a.bin.tmp", "b.npy", "other"):
        (tmp_path / name).write_bytes(b"x")
    removed = []
    real_unlink = Path.unlink

    def unlink(self, missing_ok=False):
        removed.append(self.name)
        real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(meta_module.Path, "unlink", unlink)
    unpublish(tmp_path / "meta.json", [tmp_path / "a.bin", tmp_path / "b.npy", tmp_path / "missing.bin"])
    assert removed[0] == "meta.json"  # from then on nothing looks complete
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other"]
