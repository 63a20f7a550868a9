"""What verify checks in each family (checks.py): every kind of damage fails, naming the file and the fix."""

from __future__ import annotations

import json

import numpy as np

from niels_gpt.tokenizer import train_sentencepiece
from tests.support.cache_tree import edit_meta, edit_tokens, install_tokenizer
from tests.support.cli import line_of, problems_of, verify_cli
from tests.support.corpus import tiny_corpus


def test_flipped_byte_fails_with_the_file_named_and_quick_skips_hashing(tree, capsys):
    shard = tree / "pretrain/x/train/shard_00001.bin"
    tokens = np.fromfile(shard, dtype="<u2")
    pos = int(np.flatnonzero(tokens > 10)[0])  # stays an ordinary id below vocab_size after the flip
    data = bytearray(shard.read_bytes())
    data[2 * pos] ^= 1
    shard.write_bytes(bytes(data))
    rc, out = verify_cli(capsys, tree)
    assert rc == 1
    assert "FAIL: train/shard_00001.bin: sha256" in line_of(out, "pretrain/x")
    assert "1 failed" in out
    rc, out = verify_cli(capsys, tree, "--quick")
    assert rc == 0 and "sha256 not checked (--quick)" in out


def test_truncated_shard_fails_as_odd_length(tree, capsys):
    shard = tree / "pretrain/x/val/shard_00000.bin"
    shard.write_bytes(shard.read_bytes()[:-1])
    rc, out = verify_cli(capsys, tree, "--quick")
    assert rc == 1
    assert "val/shard_00000.bin" in out and "is odd, not a whole number of uint16 tokens" in out


def test_id_outside_vocab_fails_even_quick(tree, capsys, tiny_tokenizer):
    def put(t):
        t[7] = tiny_tokenizer.vocab_size

    edit_tokens(tree / "sft/y/train_tokens.bin", put)
    rc, out = verify_cli(capsys, tree, "--quick")
    assert rc == 1
    assert (
        f"train_tokens.bin: token id {tiny_tokenizer.vocab_size:,} >= vocab_size {tiny_tokenizer.vocab_size:,}" in out
    )
    assert "first bad id at token 7" in out


def test_other_tokenizer_fails_naming_both_sha256(tree, capsys, tmp_path, tiny_tokenizer):
    other = train_sentencepiece(tiny_corpus(200, seed=9), tmp_path / "other.model", vocab_size=380, num_threads=1)
    install_tokenizer(tree, tmp_path / "other.model")  # the tree's tokenizer is replaced
    rc, out = verify_cli(capsys, tree, "--quick")
    assert rc == 1
    for name in ("pretrain/x", "sft/y"):
        assert f"built with tokenizer sha256 {tiny_tokenizer.sha256}, but" in out.split(name, 1)[1]
    assert other.sha256 in line_of(out, "pretrain/x") and "  ok" in line_of(out, "tokenizer")
    assert "streams/wiki_train" in out and "  ok" in line_of(out, "streams/wiki_train")  # byte streams need none


def test_non_monotone_offsets_fail(tree, capsys):
    idx_path = tree / "sft/y/train_idx.npy"
    offsets = np.load(idx_path)
    offsets[[3, 4]] = offsets[[4, 3]]
    np.save(idx_path, offsets)
    rc, out = verify_cli(capsys, tree / "sft" / "y")
    assert rc == 1
    assert "train_idx.npy: offsets not strictly increasing (1 times; first at example 4" in out
    assert "train_idx.npy: sha256" in out


def test_offsets_must_start_at_zero_and_stay_inside(tree, capsys):
    idx_path = tree / "sft/y/val_idx.npy"
    offsets = np.load(idx_path)
    offsets[0] = 1
    offsets[-1] = 10**9
    np.save(idx_path, offsets)
    rc, out = verify_cli(capsys, tree / "sft" / "y", "--quick")
    assert rc == 1 and "first offset is 1, must be 0" in out and "last offset 1,000,000,000 is not below" in out


def test_example_not_starting_with_a_role_token_fails(tree, capsys, tiny_tokenizer):
    offsets = np.load(tree / "sft/y/train_idx.npy")

    def put(t):
        t[offsets[2]] = 300  # an ordinary piece where example 2's role token was

    edit_tokens(tree / "sft/y/train_tokens.bin", put)
    rc, out = verify_cli(capsys, tree, "--quick")
    assert rc == 1 and "1 examples do not start with a role token (first: example 2, token 300" in out


def test_label_count_is_checked_against_meta(tree, capsys):
    meta_path = tree / "sft/y/meta.json"
    meta = json.loads(meta_path.read_text())
    meta["splits"]["train"]["num_label_tokens"] += 1
    meta_path.write_text(json.dumps(meta))
    rc, out = verify_cli(capsys, tree / "sft" / "y", "--quick")
    assert rc == 1 and "loss-active tokens, meta.json num_label_tokens says" in out


def test_document_and_token_counts_are_checked_against_meta(tree, capsys):
    meta_path = tree / "pretrain/x/meta.json"
    meta = json.loads(meta_path.read_text())
    meta["val_documents"] += 1
    meta["shards"]["train"][0]["tokens"] -= 1
    meta_path.write_text(json.dumps(meta))
    rc, out = verify_cli(capsys, tree / "pretrain" / "x", "--quick")
    assert rc == 1
    assert "train/shard_00000.bin: 1,000 tokens, meta.json says 999" in out
    assert "val: " in out and f"documents in the shards (eot ids), meta.json says {meta['val_documents']:,}" in out


def test_missing_and_unlisted_shards_fail(tree, capsys):
    (tree / "pretrain/x/train/shard_00000.bin").rename(tree / "pretrain/x/train/shard_00099.bin")
    rc, out = verify_cli(capsys, tree / "pretrain" / "x", "--quick")
    assert rc == 1
    assert "train/shard_00000.bin: missing" in out and "train/shard_00099.bin: on disk but not listed" in out


def test_damaged_stream_fails(tree, capsys):
    stream = tree / "streams/wiki_val.bin"
    data = bytearray(stream.read_bytes())
    data[0] = 0xFF  # never valid in UTF-8
    stream.write_bytes(bytes(data))
    rc, out = verify_cli(capsys, tree / "streams" / "wiki_val.bin")
    assert rc == 1
    assert "wiki_val.bin: sha256" in out and "wiki_val.bin: invalid UTF-8 at byte 0" in out
    assert "streams/wiki_train" not in out  # only the stream named


def test_format_version_mismatch_fails_naming_both_versions(tree, capsys):
    from niels_gpt.layout import FORMAT_VERSION, STREAM_FORMAT_VERSION

    edit_meta(tree / "pretrain/x/meta.json", format_version=FORMAT_VERSION - 1)
    edit_meta(tree / "streams/wiki_val.meta.json", format_version=STREAM_FORMAT_VERSION + 1)
    rc, out = verify_cli(capsys, tree, "--quick")
    assert rc == 1 and "2 failed" in out
    assert f"format_version {FORMAT_VERSION - 1} in meta.json, this code reads {FORMAT_VERSION}; rebuild it" in line_of(
        out, "pretrain/x"
    )
    assert f"format_version {STREAM_FORMAT_VERSION + 1} in meta.json, this code reads {STREAM_FORMAT_VERSION}" in (
        line_of(out, "streams/wiki_val")
    )


def test_vocab_size_and_special_ids_unlike_the_tokenizer_fail(tree, capsys, tiny_tokenizer):
    specials = {**tiny_tokenizer.special_ids, "eot": 9}
    edit_meta(tree / "sft/y/meta.json", vocab_size=tiny_tokenizer.vocab_size + 1, special_token_ids=specials)
    rc, out = verify_cli(capsys, tree / "sft" / "y", "--quick")
    assert rc == 1
    line = problems_of(out, "sft/y")
    assert (
        f"vocab_size {tiny_tokenizer.vocab_size + 1} in meta.json, the tokenizer has {tiny_tokenizer.vocab_size}"
        in line
    )
    assert f"special_token_ids {specials} in meta.json, the tokenizer has {tiny_tokenizer.special_ids}" in line


def test_tokenizer_model_unlike_its_meta_fails(tree, capsys, tiny_tokenizer):
    edit_meta(tree / "tokenizer/meta.json", sha256="0" * 64, vocab_size=tiny_tokenizer.vocab_size - 4)
    rc, out = verify_cli(capsys, tree / "tokenizer")
    assert rc == 1
    line = problems_of(out, "tokenizer")
    assert f"spm.model: sha256 {tiny_tokenizer.sha256} does not match meta.json's {'0' * 64}" in line
    assert (
        f"spm.model: {tiny_tokenizer.vocab_size:,} pieces, specials {tiny_tokenizer.special_ids}; meta.json says "
        f"{tiny_tokenizer.vocab_size - 4}" in line
    )


def test_stream_whose_length_differs_from_its_meta_fails(tree, capsys):
    stream = tree / "streams/wiki_train.bin"
    n = stream.stat().st_size
    stream.write_bytes(stream.read_bytes() + b"more text")
    rc, out = verify_cli(capsys, tree / "streams")
    assert rc == 1
    assert f"wiki_train.bin: {n + 9:,} bytes, meta says n_bytes={n}" in line_of(out, "streams/wiki_train")


def test_missing_offsets_file_fails(tree, capsys):
    (tree / "sft/y/val_idx.npy").unlink()
    rc, out = verify_cli(capsys, tree, "--quick")
    assert rc == 1 and "val_idx.npy: missing; rebuild it (the fix line below)" in line_of(out, "sft/y")
