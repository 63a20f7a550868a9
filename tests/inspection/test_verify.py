"""`verify`: a fresh cache passes; every meta.json is checked against the contract; not-built records are skipped."""

from __future__ import annotations

import json

import pytest

from niels_gpt.inspection.verify import verify
from niels_gpt.meta import NOT_BUILT_REQUIRED, REQUIRED
from tests.support.cache_tree import edit_meta
from tests.support.cli import line_of, verify_cli

META_OF = {
    "tokenizer": "tokenizer/meta.json",
    "pretrain": "pretrain/x/meta.json",
    "sft": "sft/y/meta.json",
    "streams": "streams/wiki_val.meta.json",
}


def test_fresh_cache_passes(tree, capsys):
    rc, out = verify_cli(capsys, tree)
    assert rc == 0, out
    for name in ("tokenizer", "pretrain/x", "sft/y", "streams/wiki_train", "streams/wiki_val"):
        assert "  ok" in line_of(out, name)
    assert len(list((tree / "pretrain/x/train").glob("shard_*.bin"))) >= 3  # documents continue across shards
    assert "5 ok, 0 failed, 1 skipped" in out and "sha256 of every file checked" in out


def test_not_built_is_skipped_not_failed(tree, capsys):
    rc, out = verify_cli(capsys, tree / "pretrain" / "off")
    assert rc == 0
    assert "skipped (not built: sources.off.enabled is false)" in line_of(out, "pretrain/off")


def test_missing_meta_fails(tree, capsys):
    (tree / "sft/y/meta.json").unlink()
    rc, out = verify_cli(capsys, tree, "--quick")
    assert rc == 1 and "FAIL: no meta.json: the build never finished" in line_of(out, "sft/y")


def test_stray_tmp_is_reported(tree, capsys):
    tmp = tree / "pretrain/x/train/shard_00003.bin.tmp"
    tmp.write_bytes(b"\0\0")
    rc, out = verify_cli(capsys, tree, "--quick")
    assert rc == 0  # a warning: a build may be running
    assert f"warn: stray temporary file {tmp}" in out and "1 stray .tmp file;" in out
    rc, out = verify_cli(capsys, tree / "sft" / "y", "--quick")
    assert "warn:" not in out and "0 stray .tmp files" in out  # only the named artifact's folder is searched


def test_missing_tokenizer_fails_once(tree, capsys):
    for name in ("spm.model", "meta.json"):
        (tree / "tokenizer" / name).unlink()
    rc, out = verify_cli(capsys, tree / "pretrain" / "x", "--quick")
    assert rc == 1 and "tokenizer in use  FAIL:" in out and "spm.model: tokenizer model not found" in out
    assert "  ok" in line_of(out, "pretrain/x")  # still checked against its own vocab_size


def test_meta_without_required_fields_fails_naming_them(tree, capsys):
    edit_meta(tree / "pretrain/x/meta.json", seed=None, token_dtype=None)
    edit_meta(tree / "streams/wiki_train.meta.json", sha256=None)
    rc, out = verify_cli(capsys, tree, "--quick")
    assert rc == 1
    assert "FAIL: meta.json: missing required field(s) seed, token_dtype" in line_of(out, "pretrain/x")
    assert "FAIL: wiki_train.meta.json: missing required field(s) sha256" in line_of(out, "streams/wiki_train")


@pytest.mark.parametrize("kind", list(REQUIRED))
def test_every_field_the_contract_requires_is_checked(tree, kind):
    """verify asks meta.check_required: without any of the fields meta.REQUIRED lists for its kind, an
    artifact fails naming every one of them, in the contract's order."""
    path = tree / META_OF[kind]
    required = [k for k in REQUIRED[kind] if k != "kind"]
    edit_meta(path, **dict.fromkeys(required))
    (check,) = [c for c in verify(tree, quick=True)[1] if c.artifact.meta_path == path]
    assert check.status == "FAIL"
    assert check.problems == [f"{path.name}: missing required field(s) {', '.join(required)}"]


def test_a_not_built_record_is_checked_against_the_not_built_contract(tree, capsys):
    meta = json.loads((tree / "pretrain/off/meta.json").read_text())
    assert set(NOT_BUILT_REQUIRED) <= set(meta)
    edit_meta(tree / "pretrain/off/meta.json", reason=None, seed=None)
    rc, out = verify_cli(capsys, tree / "pretrain" / "off")
    assert rc == 1 and "FAIL: meta.json: missing required field(s) seed, reason" in line_of(out, "pretrain/off")


def test_a_stream_left_unbuilt_is_skipped_with_its_reason(tree, capsys):
    from niels_gpt.layout import STREAM_FORMAT_VERSION
    from niels_gpt.meta import not_built, write_meta

    path = tree / "streams" / "wiki_val.meta.json"
    (tree / "streams" / "wiki_val.bin").unlink()
    write_meta(path, not_built("streams", reason="too short", format_version=STREAM_FORMAT_VERSION, seed=0))
    rc, out = verify_cli(capsys, tree / "streams")
    assert rc == 0 and "skipped (not built: too short)" in line_of(out, "streams/wiki_val")


def test_a_meta_of_another_family_fails(tree, capsys):
    edit_meta(tree / "pretrain/x/meta.json", kind="sft")
    edit_meta(tree / "streams/wiki_train.meta.json", kind="pretrain")
    rc, out = verify_cli(capsys, tree, "--quick")
    assert rc == 1
    assert "FAIL: meta.json says kind 'sft', but the artifact sits in pretrain/" in line_of(out, "sft/x")
    line = line_of(out, "streams/wiki_train")
    assert "FAIL: meta.json says kind 'pretrain', but streams/wiki_train is a streams artifact" in line


def test_a_meta_without_kind_is_found_by_its_folder_and_fails(tree, capsys):
    edit_meta(tree / "sft/y/meta.json", kind=None)
    rc, out = verify_cli(capsys, tree, "--quick")
    assert rc == 1 and "FAIL: meta.json: kind None is not an artifact kind" in line_of(out, "sft/y")
