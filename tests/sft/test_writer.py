"""The SFT writer (sft/writer.py): meta.json, splits, workers and batches, drops, empty splits, atomicity,
the "not built" record."""

from __future__ import annotations

import os

import pytest

from niels_gpt.chat_template import render_chat_sft
from niels_gpt.data.types import ChatMessage, ChatSample
from niels_gpt.hashing import sha256_file
from niels_gpt.layout import FORMAT_VERSION
from niels_gpt.layout import sft_file_names as output_names
from niels_gpt.meta import REQUIRED_SFT, check_required, read_meta
from niels_gpt.sft import writer as sft_writer
from niels_gpt.sft.writer import build_sft_cache
from niels_gpt.splits import val_groups
from tests.support.cache_files import read_sft_split as read_split
from tests.support.chats import random_chats

CHATS = random_chats(120, seed=11)


def build(tok, out, chats=CHATS, **kw):
    kw = {"val_frac": 0.2, "seed": 42, **kw}
    return build_sft_cache(chats, str(out), tokenizer=tok, **kw)


def test_the_hub_commit_the_loader_read_is_the_meta_dataset_revision(tiny_tokenizer, tmp_path):
    sha = "ab" * 20
    read = build(tiny_tokenizer, tmp_path / "hub", source="oasst1", provenance={"revision": sha, "local": False})
    local = build(tiny_tokenizer, tmp_path / "local", source="oasst1", provenance={"revision": None, "local": True})
    assert (read["dataset_revision"], local["dataset_revision"]) == (sha, None)


def test_meta_has_the_header_the_required_fields_and_the_file_hashes(tiny_tokenizer, tmp_path):
    meta = build(tiny_tokenizer, tmp_path, source="dolly15k", t_max=4096, truncation="tail", provenance={"x": 1})
    assert read_meta(str(tmp_path / "meta.json")) == meta
    for key in REQUIRED_SFT + ("source", "splits", "val_frac", "seed", "T_max", "truncation", "num_dropped", "files"):
        assert key in meta, key
    assert meta["source"] == "dolly15k" and meta["T_max"] == 4096 and meta["truncation"] == "tail"
    check_required(meta)  # by its kind
    assert meta["kind"] == "sft" and meta["format_version"] == FORMAT_VERSION and meta["provenance"] == {"x": 1}
    assert meta["tokenizer_sha256"] == tiny_tokenizer.sha256 and meta["special_token_ids"] == tiny_tokenizer.special_ids
    assert (meta["vocab_size"], meta["eot_id"], meta["built"]) == (
        tiny_tokenizer.vocab_size,
        tiny_tokenizer.eot_id,
        True,
    )
    labels = sum(sum(v != -100 for v in render_chat_sft(tiny_tokenizer, c)[1]) for c in CHATS)
    assert meta["splits"]["train"]["num_label_tokens"] + meta["splits"]["val"]["num_label_tokens"] == labels
    for name, info in meta["files"].items():
        assert sha256_file(tmp_path / name) == info["sha256"]
        assert os.path.getsize(tmp_path / name) == info["bytes"]


def test_files_are_identical_for_one_two_and_three_workers(tiny_tokenizer, tmp_path, monkeypatch):
    monkeypatch.setattr(sft_writer, "ENCODE_BATCH", 9)  # many batches: workers finish out of order
    chats = random_chats(300, seed=5)
    digests, metas = [], []
    for n in (1, 2, 3):
        metas.append(build(tiny_tokenizer, tmp_path / str(n), chats=chats, t_max=48, num_threads=n))
        digests.append({name: sha256_file(tmp_path / str(n) / name) for name in output_names()})
    assert digests[0] == digests[1] == digests[2]
    assert metas[0]["splits"] == metas[1]["splits"] == metas[2]["splits"]
    assert sum(metas[0]["num_dropped"].values()) > 0  # t_max=48: some examples are dropped


def test_group_split_keeps_each_group_in_one_split(tiny_tokenizer, tmp_path):
    groups = [f"tree{i // 4}" for i in range(len(CHATS))]  # oasst1-style: 4 threads per tree
    meta = build(tiny_tokenizer, tmp_path, group_keys=groups, val_frac=0.25)
    held_out = val_groups(groups, 0.25, 42)
    val_chats = [c for c, g in zip(CHATS, groups) if g in held_out]
    assert read_split(tmp_path, "val") == [render_chat_sft(tiny_tokenizer, c)[0] for c in val_chats]
    assert meta["split_by"] == "group" and meta["splits"]["val"]["num_groups"] == len(held_out)
    assert len(val_chats) % 4 == 0 and len(held_out) == 7  # floor(30 trees * 0.25)


def test_group_keys_length_must_match(tiny_tokenizer, tmp_path):
    with pytest.raises(ValueError, match="group_keys has 3 entries"):
        build(tiny_tokenizer, tmp_path, group_keys=[1, 2, 3])


def test_chat_samples_are_accepted(tiny_tokenizer, tmp_path):
    samples = [ChatSample([ChatMessage(m["role"], m["content"]) for m in c], "x", {}) for c in CHATS]
    build(tiny_tokenizer, tmp_path / "a")
    build(tiny_tokenizer, tmp_path / "b", chats=samples)
    for name in ("train_tokens.bin", "val_tokens.bin", "val_idx.npy"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_example_without_target_in_window_is_dropped(tiny_tokenizer, tmp_path):
    long_user = " ".join(["river stone"] * 40)
    late = [{"role": "user", "content": long_user}, {"role": "assistant", "content": "ok"}]
    chats = [late, CHATS[0], CHATS[1]]
    n_late = len(render_chat_sft(tiny_tokenizer, late)[0])
    assert n_late > 40
    head = build(tiny_tokenizer, tmp_path / "h", chats=chats, val_frac=0.0, t_max=32, truncation="head")
    tail = build(tiny_tokenizer, tmp_path / "t", chats=chats, val_frac=0.0, t_max=32, truncation="tail")
    assert head["num_dropped"] == {"train": 1, "val": 0} and head["train_examples"] == 2
    assert tail["num_dropped"] == {"train": 0, "val": 0} and tail["train_examples"] == 3
    assert read_split(tmp_path / "t", "train")[0] == render_chat_sft(tiny_tokenizer, late)[0]  # stored whole


def test_failed_build_leaves_nothing_and_removes_stale_cache(tiny_tokenizer, tmp_path):
    build(tiny_tokenizer, tmp_path / "c")
    bad = CHATS[:5] + [[{"role": "user", "content": "no answer"}]]
    with pytest.raises(ValueError, match="example 5: no assistant message"):
        build(tiny_tokenizer, tmp_path / "c", chats=bad)
    assert os.listdir(tmp_path / "c") == []
    with pytest.raises(ValueError, match="example 5: no assistant message"):
        build(tiny_tokenizer, tmp_path / "new", chats=bad)
    assert not (tmp_path / "new").exists()


def test_failure_while_reading_input_leaves_no_cache(tiny_tokenizer, tmp_path):
    def examples():
        yield from CHATS[:3]
        raise ValueError("primer.jsonl:4: messages must be a non-empty list")

    build(tiny_tokenizer, tmp_path)
    with pytest.raises(ValueError, match="primer.jsonl:4"):
        build(tiny_tokenizer, tmp_path, chats=examples())
    assert os.listdir(tmp_path) == []


def test_special_token_strings_in_content_stay_text(tiny_tokenizer, tmp_path):
    from niels_gpt.special_tokens import SPECIAL_TOKENS

    chat = [
        {"role": "user", "content": SPECIAL_TOKENS["eot"]},
        {"role": "assistant", "content": SPECIAL_TOKENS["asst"]},
    ]
    build(tiny_tokenizer, tmp_path, chats=[chat], val_frac=0.0)
    (tokens,) = read_split(tmp_path, "train")
    specials = set(tiny_tokenizer.special_ids.values())
    assert [t for t in tokens if t in specials] == [
        tiny_tokenizer.usr_id,
        tiny_tokenizer.eot_id,
        tiny_tokenizer.asst_id,
        tiny_tokenizer.eot_id,
    ]


@pytest.mark.parametrize("batch", [1, 7])
def test_encode_batches_do_not_change_a_byte(tiny_tokenizer, tmp_path, monkeypatch, batch):
    """Examples are rendered ENCODE_BATCH at a time; offsets and tokens must not depend on the batch size."""
    long = [{"role": "user", "content": "the river " * 40}, {"role": "assistant", "content": "ok"}]
    chats = [c for pair in zip(CHATS, [long] * len(CHATS)) for c in pair]  # drops between kept examples
    whole = build(tiny_tokenizer, tmp_path / "whole", chats=chats, t_max=32)
    monkeypatch.setattr(sft_writer, "ENCODE_BATCH", batch)
    batched = build(tiny_tokenizer, tmp_path / "batched", chats=chats, t_max=32)
    assert whole["num_dropped"]["train"] > 0 and batched == whole
    for name in output_names():
        assert (tmp_path / "batched" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name


def test_a_disabled_source_writes_empty_split_files_and_a_meta_that_says_why(tiny_tokenizer, tmp_path):
    out = tmp_path / "not" / "yet" / "dolly15k"  # parent folders are created
    meta = sft_writer.write_not_built(
        out,
        source="dolly15k",
        reason="disabled",
        seed=3,
        tokenizer=tiny_tokenizer,
        dataset_name="d/x",
        dataset_config="c",
    )
    assert read_meta(str(out / "meta.json")) == meta
    names = [name for name in output_names() if name.endswith((".bin", ".npy"))]
    files = {name: {"sha256": sha256_file(out / name), "bytes": os.path.getsize(out / name)} for name in names}
    check_required(meta)
    assert meta == {
        "kind": "sft",
        "format_version": FORMAT_VERSION,
        "source": "dolly15k",
        "dataset_name": "d/x",
        "dataset_config": "c",
        "dataset_revision": None,
        "seed": 3,
        "token_dtype": "uint16-le",
        "tokenizer_sha256": tiny_tokenizer.sha256,
        "vocab_size": tiny_tokenizer.vocab_size,
        "special_token_ids": dict(tiny_tokenizer.special_ids),
        "eot_id": tiny_tokenizer.eot_id,
        "built": False,
        "reason": "disabled",
        "split_rule": None,
        "train_examples": 0,
        "val_examples": 0,
        "files": files,
    }
    assert [read_split(out, split) for split in ("train", "val")] == [[], []]


def empty_split(dropped: dict) -> dict:
    return {"num_examples": 0, "num_input_examples": 9, "num_dropped": sum(dropped.values()), "dropped": dropped}


@pytest.mark.parametrize(
    "source, message",
    [
        (
            None,
            "SFT cache: the train split would hold 0 examples (examples read: 9, dropped: no_assistant_reply 4, "
            "no_target_in_window 5; split by val_frac=0.1). To fix: give the source examples (check its dataset "
            "or file); or keep long examples: truncation: prompt, or a larger sft.t_max",
        ),
        (
            "oasst1",
            "oasst1: the train split would hold 0 examples (examples read: 9, dropped: no_assistant_reply 4, "
            "no_target_in_window 5; split by sources.oasst1.val_frac=0.1). To fix: give the source examples (check "
            "its dataset or file); or keep long examples: sources.oasst1.truncation: prompt, or a larger sft.t_max",
        ),
    ],
)
def test_an_empty_split_is_refused_naming_the_source_counts_and_fix(source, message):
    splits = {"train": empty_split({"no_assistant_reply": 4, "no_target_in_window": 5}), "val": empty_split({})}
    with pytest.raises(ValueError) as err:
        sft_writer.check_splits_filled(splits, source=source, val_frac=0.1, truncation="head")
    assert str(err.value) == message
    splits["train"]["num_examples"] = 3
    with pytest.raises(ValueError, match=r"the val split would hold 0 examples \(examples read: 9, dropped: none;"):
        sft_writer.check_splits_filled(splits, source=source, val_frac=0.1, truncation="head")
    splits["train"]["num_examples"] = 0
    with pytest.raises(ValueError) as err:
        sft_writer.check_splits_filled(splits, source=source, val_frac=0.1, truncation="prompt")
    assert str(err.value) == message.split("; or keep long examples")[0]  # prompt truncation: no such hint
    splits["train"]["num_examples"] = 3
    assert sft_writer.check_splits_filled(splits, source=source, val_frac=0, truncation="head") == {
        "val": "val_frac is 0: built without val on purpose"
    }


def test_meta_of_a_built_cache_names_everything_it_was_built_with(tiny_tokenizer, tmp_path):
    primer_style = [{"messages": chat} for chat in CHATS]  # primer.jsonl objects: {"messages": [...]}
    meta = build_sft_cache(
        primer_style, str(tmp_path), tokenizer=tiny_tokenizer, val_frac=0.2, seed=42, source="dolly15k",
        dataset_name="someone/chats", dataset_config="en", provenance={"files": ["chats.jsonl"]},
    )  # fmt: skip
    assert read_meta(str(tmp_path / "meta.json")) == meta
    assert meta == build(tiny_tokenizer, tmp_path / "plain", source="dolly15k", dataset_name="someone/chats",
                         dataset_config="en", provenance={"files": ["chats.jsonl"]})  # fmt: skip
    expected = {
        "kind": "sft", "source": "dolly15k", "dataset_name": "someone/chats", "dataset_config": "en",
        "seed": 42, "built": True, "split_by": "example", "val_frac": 0.2, "T_max": 1024, "truncation": "head",
        "empty_splits": {}, "template": sft_writer.TEMPLATE, "offset_dtype": "int64-le",
        "num_input_examples": len(CHATS), "provenance": {"files": ["chats.jsonl"]},
    }  # fmt: skip
    assert {k: meta[k] for k in expected} == expected
    assert meta["split_rule"].endswith("; by example")
    assert meta["train_examples"] + meta["val_examples"] == len(CHATS)
    assert sum(meta["splits"][s]["num_input_examples"] for s in ("train", "val")) == len(CHATS)
    assert build(tiny_tokenizer, tmp_path / "unnamed", source="oasst1")["dataset_name"] == "oasst1"


def test_t_max_of_one_is_the_smallest_accepted(tiny_tokenizer, tmp_path):
    replies = [[{"role": "assistant", "content": f"ok {i}"}] for i in range(10)]
    assert build(tiny_tokenizer, tmp_path / "one", chats=replies, t_max=1, val_frac=0.3)["T_max"] == 1
    with pytest.raises(ValueError, match=r"^t_max must be >= 1, got 0$"):
        build(tiny_tokenizer, tmp_path / "zero", chats=replies, t_max=0)


def test_a_bad_example_is_named_and_a_new_folder_is_left_absent(tiny_tokenizer, tmp_path):
    chats = [*CHATS[:5], [{"role": "user", "content": "no reply"}]]
    with pytest.raises(ValueError, match=r"^dolly15k example 5: no assistant message"):
        build(tiny_tokenizer, tmp_path / "new", chats=chats, source="dolly15k")
    assert not (tmp_path / "new").exists()
    with pytest.raises(ValueError, match=r"^example 5: no assistant message"):
        build(tiny_tokenizer, tmp_path / "new", chats=chats)
    long_prompts = [[{"role": "user", "content": "the river " * 40}, {"role": "assistant", "content": "ok"}]] * 9
    with pytest.raises(ValueError, match=r"^oasst1: the train split would hold 0 examples"):  # after its files began
        build(tiny_tokenizer, tmp_path / "new", chats=long_prompts, t_max=8, source="oasst1")
    assert not (tmp_path / "new").exists()


def test_a_vocabulary_too_large_for_uint16_is_refused_naming_the_model(tmp_path):
    class Big:  # only what the check reads
        vocab_size = 70_000

    class BigModel(Big):
        model_path = "big.model"

    with pytest.raises(ValueError, match=r"^big\.model: vocabulary of 70,000 pieces does not fit"):
        build(BigModel(), tmp_path)
    with pytest.raises(ValueError, match=r"^tokenizer: vocabulary of 70,000 pieces"):
        build(Big(), tmp_path)
