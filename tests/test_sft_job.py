"""build_sft_source + `build-sft` / `build-sft-primer`: config -> registry -> the one writer; disabled sources."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sft_chats import random_chats

from niels_gpt.cache.cli import main
from niels_gpt.cache.meta import read_meta
from niels_gpt.chat_template import render_chat_sft
from niels_gpt.command_line import run_cli
from niels_gpt.config import prepare_config
from niels_gpt.data import registry
from niels_gpt.data.types import ChatMessage, ChatSample
from niels_gpt.layout import sft_file_names as output_names
from niels_gpt.sft.job import build_sft_source
from niels_gpt.splits import val_groups


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


def test_disabled_source_writes_not_built_meta_and_every_output(tiny_tokenizer_path, tmp_path):
    cfg = prepare_config({"sources": {"dolly15k": {"enabled": False}}})
    meta = build_sft_source(cfg, "dolly15k", tokenizer_path=tiny_tokenizer_path, out_dir=str(tmp_path))
    assert meta["built"] is False and "enabled is false" in meta["reason"]
    assert read_meta(str(tmp_path / "meta.json")) == meta
    for name in output_names():
        assert (tmp_path / name).exists(), name  # every output the Snakemake rule declares
    assert np.load(tmp_path / "train_idx.npy").shape == (0,)


def test_build_sft_primer_through_the_registry_with_spec(tiny_tokenizer_path, tmp_path):
    primer = tmp_path / "p.jsonl"
    primer.write_text("".join(json.dumps({"messages": c}) + "\n" for c in random_chats(30, seed=2)))
    spec = json.dumps({"seed": 5, "sources": {"primer": {"jsonl": str(primer), "truncation": "head"}}})
    out = tmp_path / "sft" / "primer"
    argv = [
        "build-sft",
        "--source",
        "primer",
        "--tokenizer",
        tiny_tokenizer_path,
        "--out-dir",
        str(out),
        "--spec",
        spec,
    ]
    assert run_cli(main, argv) == 0
    meta = read_meta(str(out / "meta.json"))
    assert meta["seed"] == 5 and meta["truncation"] == "head" and meta["train_examples"] + meta["val_examples"] == 30


def test_build_sft_primer_flags_reach_the_cache(tiny_tokenizer_path, tmp_path, capsys):
    primer = tmp_path / "p.jsonl"
    primer.write_text("".join(json.dumps({"messages": c}) + "\n" for c in random_chats(40, seed=2)))
    argv = [
        "build-sft-primer",
        "--primer-jsonl",
        str(primer),
        "--out-dir",
        str(tmp_path / "sft"),
        "--seed",
        "9",
        "--val-frac",
        "0.25",
        "--t-max",
        "64",
        "--tokenizer",
        tiny_tokenizer_path,
        "--spec",
        "{}",
    ]
    assert run_cli(main, argv) == 0
    meta = read_meta(str(tmp_path / "sft" / "primer" / "meta.json"))
    assert (meta["seed"], meta["val_frac"], meta["T_max"]) == (9, 0.25, 64)
    assert meta["val_examples"] + meta["num_dropped"]["val"] == 10  # a quarter of 40, by the seeded split
    assert meta["provenance"]["path"] == str(primer)
    printed = capsys.readouterr().out
    assert f"train: {meta['train_examples']:,} examples" in printed and str(tmp_path / "sft" / "primer") in printed


def test_a_key_of_another_source_is_refused_with_its_name(tmp_path):
    with pytest.raises(ValueError, match=r"unknown key 'sources.primer.dataset_id'"):
        main(["build-sft", "--source", "primer", "--set", "sources.primer.dataset_id=x/y", "--out-dir", str(tmp_path)])


@pytest.mark.usefixtures("isolated_hf_cache")
@pytest.mark.parametrize("source", ["dolly15k", "oasst1", "primer"])
def test_real_loaders_end_to_end(tiny_tokenizer, tiny_tokenizer_path, tmp_path, source):
    from loader_fixtures import write_demo_tree

    from niels_gpt.cache.sft_dataset import SFTExampleDataset
    from niels_gpt.data.registry import sft_input

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
