"""build_sft_source (sft/job.py): config -> registry -> the one writer; disabled sources; the config keys of
every SFT source, seen in the cache bytes."""

from __future__ import annotations

import numpy as np
import pytest

from niels_gpt.chat_template import render_chat_sft
from niels_gpt.config import prepare_config
from niels_gpt.data import registry
from niels_gpt.data.types import ChatMessage, ChatSample
from niels_gpt.layout import sft_file_names as output_names
from niels_gpt.meta import check_required, read_meta
from niels_gpt.sft.job import build_sft_source
from niels_gpt.splits import val_groups
from tests.support.cache_files import read_sft_split
from tests.support.chats import random_chats


def fake_oasst1(n_trees=20, per_tree=3):
    chats = random_chats(n_trees * per_tree, seed=4)
    samples = [
        ChatSample([ChatMessage(m["role"], m["content"]) for m in c], "oasst1", {"group": f"tree-{i // per_tree}"})
        for i, c in enumerate(chats)
    ]
    return samples


def test_oasst1_threads_of_a_tree_stay_in_one_split(tiny_tokenizer, tiny_tokenizer_path, tmp_path, monkeypatch):
    samples = fake_oasst1()
    prov = {"source": "oasst1"}
    monkeypatch.setattr(registry, "sft_input", lambda cfg, source: (iter(samples), prov))
    cfg = prepare_config({"seed": 3, "sources": {"oasst1": {"val_frac": 0.2}}, "sft": {"t_max": 512}})
    meta = build_sft_source(cfg, "oasst1", tokenizer_path=tiny_tokenizer_path, out_dir=str(tmp_path))
    held_out = val_groups([s.meta["group"] for s in samples], 0.2, 3)
    assert len(held_out) == 4 and meta["split_by"] == "group"
    assert meta["val_examples"] == 12 and meta["seed"] == 3 and meta["T_max"] == 512
    assert meta["truncation"] == "head" and meta["provenance"]["source"] == "oasst1"
    tokens = np.fromfile(tmp_path / "val_tokens.bin", dtype="<u2").tolist()
    want = [t for s in samples if s.meta["group"] in held_out for t in render_chat_sft(tiny_tokenizer, s.messages)[0]]
    assert tokens == want


def test_sample_without_group_is_refused(tiny_tokenizer_path, tmp_path, monkeypatch):
    bad = [ChatSample([ChatMessage("assistant", "x")], "dolly15k", {})]
    monkeypatch.setattr(registry, "sft_input", lambda cfg, source: (iter(bad), {}))
    with pytest.raises(ValueError, match="no 'group'"):
        build_sft_source(
            prepare_config({}), "dolly15k", tokenizer_path=tiny_tokenizer_path, out_dir=str(tmp_path / "d")
        )


@pytest.mark.parametrize("source", registry.SFT_SOURCES)
def test_disabled_source_writes_not_built_meta_and_every_output(tiny_tokenizer_path, tmp_path, source):
    cfg = prepare_config({"sources": {source: {"enabled": False}}})
    meta = build_sft_source(cfg, source, tokenizer_path=tiny_tokenizer_path, out_dir=str(tmp_path))
    assert meta["built"] is False and meta["reason"] == f"sources.{source}.enabled is false"
    assert read_meta(str(tmp_path / "meta.json")) == meta
    check_required(meta)
    assert meta["kind"] == "sft" and meta["eot_id"] is not None  # the model exists, so the header names it
    for name in output_names():
        assert (tmp_path / name).exists(), name  # every output the Snakemake rule declares
    assert np.load(tmp_path / "train_idx.npy").shape == (0,)


@pytest.mark.usefixtures("isolated_hf_cache")
@pytest.mark.parametrize("source", ["dolly15k", "oasst1", "primer"])
def test_real_loaders_end_to_end(tiny_tokenizer, tiny_tokenizer_path, tmp_path, source):
    from niels_gpt.cache.sft_dataset import SFTExampleDataset
    from niels_gpt.data.registry import sft_input
    from tests.support.hub_files import write_demo_tree

    cfg = prepare_config({**write_demo_tree(tmp_path / "demo"), "seed": 1})
    cfg["sources"][source]["val_frac"] = 0.25
    meta = build_sft_source(cfg, source, tokenizer_path=tiny_tokenizer_path, out_dir=str(tmp_path / source))
    samples = list(sft_input(cfg, source)[0])
    groups = [s.meta["group"] for s in samples]
    held_out = val_groups(groups, 0.25, 1)
    for split, want in (("train", False), ("val", True)):
        tokens = np.fromfile(tmp_path / source / f"{split}_tokens.bin", dtype="<u2").tolist()
        chosen = [s for s, g in zip(samples, groups) if (g in held_out) == want]
        assert tokens == [t for s in chosen for t in render_chat_sft(tiny_tokenizer, s.messages)[0]]
        assert meta["splits"][split]["num_examples"] == len(chosen) > 0
    assert meta["provenance"]["source"] == source and meta["provenance"]["demo"] is True
    ds = SFTExampleDataset.from_cache_dir(tmp_path / source, "train", T=64, tokenizer=tiny_tokenizer)
    assert ds.truncation == cfg["sources"][source]["truncation"] and len(ds) > 0


# ---- config keys of the SFT sources, seen in the cache bytes ----


@pytest.fixture
def demo_cfg(tmp_path, isolated_hf_cache):
    from tests.support.hub_files import write_demo_tree

    return prepare_config({**write_demo_tree(tmp_path / "demo"), "seed": 1})


@pytest.mark.parametrize("include_system", [False, True])
def test_dolly_include_system_puts_the_system_message_first_in_every_example(
    demo_cfg, tiny_tokenizer, tiny_tokenizer_path, tmp_path, include_system
):
    from niels_gpt.data.dolly import SYSTEM_PROMPT

    demo_cfg["sources"]["dolly15k"].update(include_system=include_system, val_frac=0.0)
    build_sft_source(demo_cfg, "dolly15k", tokenizer_path=tiny_tokenizer_path, out_dir=str(tmp_path / "d"))
    examples = read_sft_split(tmp_path / "d", "train")
    system = [tiny_tokenizer.special_ids["sys"], *tiny_tokenizer.encode(SYSTEM_PROMPT), tiny_tokenizer.eot_id]
    assert len(examples) == 4
    assert all((e[: len(system)] == system) == include_system for e in examples)
    assert all(e[len(system) if include_system else 0] == tiny_tokenizer.special_ids["usr"] for e in examples)


def oasst_tree(tree: str, lang: str) -> list[dict]:
    """An English question with an English answer and a second answer in `lang` (plus its follow-up)."""
    rows = [
        (tree, None, "prompter", "en", f"question {tree}"),
        (f"{tree}-en", tree, "assistant", "en", f"answer {tree} in english"),
        (f"{tree}-x", tree, "assistant", lang, f"antwort {tree} auf deutsch"),
        (f"{tree}-x2", f"{tree}-x", "prompter", "en", f"follow up {tree}"),
        (f"{tree}-x3", f"{tree}-x2", "assistant", "en", f"second answer {tree}"),
    ]
    keys = ("message_id", "parent_id", "role", "lang", "text")
    return [{**dict(zip(keys, r)), "message_tree_id": tree, "deleted": False} for r in rows]


@pytest.fixture
def oasst_cfg(tmp_path, isolated_hf_cache):
    from tests.support.hub_files import rows_to_columns, write_parquet

    path = write_parquet(tmp_path / "oasst1.parquet", rows_to_columns(oasst_tree("t0", "de") + oasst_tree("t1", "de")))
    return prepare_config(
        {"demo": True, "sources": {"oasst1": {"demo_data_files": {"train": str(path)}, "val_frac": 0.0}}}
    )


@pytest.mark.parametrize("english_only", [True, False])
def test_oasst1_english_only_leaves_other_languages_and_their_subtrees_out(
    oasst_cfg, tiny_tokenizer, tiny_tokenizer_path, tmp_path, english_only
):
    oasst_cfg["sources"]["oasst1"]["english_only"] = english_only
    meta = build_sft_source(oasst_cfg, "oasst1", tokenizer_path=tiny_tokenizer_path, out_dir=str(tmp_path / "o"))
    text = [tiny_tokenizer.decode([t for t in e if t > 4]) for e in read_sft_split(tmp_path / "o", "train")]
    assert len(text) == (2 if english_only else 4) == meta["train_examples"]
    assert sum("auf deutsch" in t for t in text) == (0 if english_only else 2)
    assert sum("second answer" in t for t in text) == (0 if english_only else 2)  # the subtree goes with it


@pytest.mark.parametrize("max_messages", [2, 3, 4])
def test_oasst1_max_messages_caps_the_messages_of_every_example(
    oasst_cfg, tiny_tokenizer, tiny_tokenizer_path, tmp_path, max_messages
):
    oasst_cfg["sources"]["oasst1"].update(max_messages=max_messages, english_only=False)
    build_sft_source(oasst_cfg, "oasst1", tokenizer_path=tiny_tokenizer_path, out_dir=str(tmp_path / "o"))
    roles = set(tiny_tokenizer.special_ids[r] for r in ("sys", "usr", "asst"))
    counts = sorted(sum(t in roles for t in e) for e in read_sft_split(tmp_path / "o", "train"))
    # threads: question + english answer (2 messages), question + german answer + follow-up + answer (4);
    # a cut ends on an assistant message, and a thread cut to an earlier one is emitted once
    assert counts == {2: [2, 2, 2, 2], 3: [2, 2, 2, 2], 4: [2, 2, 4, 4]}[max_messages]


def test_t_max_drops_examples_with_no_reply_token_in_the_kept_window(tiny_tokenizer_path, tmp_path, monkeypatch):
    long_prompt = [ChatMessage("user", "the river " * 40), ChatMessage("assistant", "yes")]
    short = [ChatMessage("user", "hi"), ChatMessage("assistant", "hello")]
    samples = [ChatSample(m, "oasst1", {"group": f"tree-{i}"}) for i, m in enumerate([long_prompt, short] * 10)]
    monkeypatch.setattr(registry, "sft_input", lambda cfg, source: (iter(samples), {}))
    metas = {}
    for t_max in (16, 512):
        cfg = prepare_config({"sft": {"t_max": t_max}, "sources": {"oasst1": {"val_frac": 0.0}}})
        out = tmp_path / str(t_max)
        metas[t_max] = build_sft_source(cfg, "oasst1", tokenizer_path=tiny_tokenizer_path, out_dir=str(out))
        assert len(read_sft_split(out, "train")) == metas[t_max]["train_examples"]
    assert metas[16]["train_examples"] == 10 and metas[16]["num_dropped"]["train"] == 10  # head: no reply in 17 tokens
    assert metas[512]["train_examples"] == 20 and metas[512]["num_dropped"]["train"] == 0


@pytest.mark.parametrize("source", registry.SFT_SOURCES)
@pytest.mark.parametrize("truncation", ["head", "tail", "prompt"])
def test_truncation_of_each_source_decides_what_a_long_example_keeps(
    tiny_tokenizer, tiny_tokenizer_path, tmp_path, monkeypatch, source, truncation
):
    from niels_gpt.cache.sft_dataset import SFTExampleDataset

    long_prompt = [ChatMessage("user", "the river " * 40), ChatMessage("assistant", "yes")]
    long_reply = [ChatMessage("user", "hi"), ChatMessage("assistant", "the stone " * 40)]
    samples = [ChatSample(m, source, {"group": i}) for i, m in enumerate([long_prompt, long_reply] * 5)]
    monkeypatch.setattr(registry, "sft_input", lambda cfg, source: (iter(samples), {}))
    cfg = prepare_config({"sft": {"t_max": 16}, "sources": {source: {"val_frac": 0.0, "truncation": truncation}}})
    meta = build_sft_source(cfg, source, tokenizer_path=tiny_tokenizer_path, out_dir=str(tmp_path))
    train = meta["splits"]["train"]
    want = {  # (examples kept, dropped for lack of a target in the window, cut by reason)
        "head": (5, 5, {"end": 5}),
        "tail": (10, 0, {"start": 10}),
        "prompt": (10, 0, {"prompt": 5, "reply": 5}),
    }[truncation]
    assert (train["num_examples"], train["dropped"]["no_target_in_window"], train["cut"]) == want
    ds = SFTExampleDataset.from_cache_dir(tmp_path, "train", T=16, tokenizer=tiny_tokenizer)
    x, y, y_masked = ds.rows(np.arange(len(ds)))
    yes = tiny_tokenizer.encode("yes")[0]
    assert ds.truncation == truncation and bool((y_masked == yes).any()) == (truncation != "head")
