"""build_sft_source + `build-sft`: config -> registry -> the one writer; disabled sources; flag checks."""

from __future__ import annotations

import json

import numpy as np
import pytest
from loader_fixtures import isolated_hf_cache  # noqa: F401
from sft_chats import random_chats

import niels_gpt.cache.sft_job as sft_job
from niels_gpt.cache.cli import main
from niels_gpt.cache.cli_common import run_cli
from niels_gpt.cache.meta import read_meta
from niels_gpt.cache.sft_job import build_sft_source
from niels_gpt.cache.sft_writer import output_names
from niels_gpt.chat_template import render_chat_sft
from niels_gpt.config import prepare_config
from niels_gpt.data.types import ChatMessage, ChatSample
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
    monkeypatch.setattr(sft_job, "_sft_input", lambda cfg, source: (iter(samples), prov))
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
    monkeypatch.setattr(sft_job, "_sft_input", lambda cfg, source: (iter(bad), {}))
    with pytest.raises(ValueError, match="no 'group'"):
        build_sft_source(prepare_config({}), "dolly15k", tokenizer_path=tiny_tokenizer_path, out_dir=str(tmp_path / "d"))


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
    argv = ["build-sft", "--source", "primer", "--tokenizer", tiny_tokenizer_path, "--out-dir", str(out), "--spec", spec]
    assert run_cli(main, argv) == 0
    meta = read_meta(str(out / "meta.json"))
    assert meta["seed"] == 5 and meta["truncation"] == "head" and meta["train_examples"] + meta["val_examples"] == 30


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--source", "oasst1", "--include-system"], "--include-system applies to --source dolly15k only"),
        (["--source", "dolly15k", "--max-messages", "4"], "--max-messages applies to --source oasst1 only"),
        (["--source", "primer", "--dataset-id", "x/y"], "--dataset-id does not apply to primer"),
    ],
)
def test_flags_of_another_source_are_refused(tmp_path, capsys, argv, match):
    with pytest.raises(SystemExit) as e:
        main(["build-sft", *argv, "--out-dir", str(tmp_path)])
    assert e.value.code == 2 and match in capsys.readouterr().err


def test_flags_reach_the_config(tiny_tokenizer_path, tmp_path, monkeypatch):
    seen = {}

    def fake(cfg, source, *, tokenizer_path, out_dir):
        seen.update(cfg=cfg, source=source, out_dir=out_dir)
        return {"source": source, "built": False, "reason": "test"}

    monkeypatch.setattr(sft_job, "build_sft_source", fake)
    argv = ["build-sft", "--source", "oasst1", "--no-english-only", "--max-messages", "8", "--val-frac", "0.3",
            "--truncation", "tail", "--t-max", "256", "--seed", "9", "--no-enabled", "--demo",
            "--data-files", "train=a/*.parquet", "--tokenizer", tiny_tokenizer_path, "--config-file", "/dev/null"]  # fmt: skip
    assert run_cli(main, argv) == 0
    cfg, s = seen["cfg"], seen["cfg"]["sources"]["oasst1"]
    assert (s["english_only"], s["max_messages"], s["val_frac"], s["truncation"], s["enabled"]) == (False, 8, 0.3, "tail", False)
    assert cfg["sft"]["t_max"] == 256 and cfg["seed"] == 9 and cfg["demo"] is True
    assert s["demo_data_files"] == {"train": "a/*.parquet"} and seen["out_dir"].endswith("sft/oasst1")


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
