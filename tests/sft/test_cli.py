"""`build-sft` and `build-sft-primer` (sft/cli.py): config from --spec/--set/flags, defaults derived from
cache_dir, the summary on stderr, bad primer input stopped with file:line and nothing left."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from niels_gpt.cache.cli import main
from niels_gpt.command_line import run_cli
from niels_gpt.meta import read_meta
from tests.support.chats import random_chats
from tests.support.primer import build_primer, write_primer


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
    out, err = capsys.readouterr()
    assert f"train: {meta['train_examples']:,} examples" in err and str(tmp_path / "sft" / "primer") in err
    assert out == ""  # the summary is a milestone (stderr); stdout is left to what a command is asked for


def test_a_key_of_another_source_is_refused_with_its_name(tmp_path):
    with pytest.raises(ValueError, match=r"unknown key 'sources.primer.dataset_id'"):
        main(["build-sft", "--source", "primer", "--set", "sources.primer.dataset_id=x/y", "--out-dir", str(tmp_path)])


@pytest.mark.parametrize(
    "line, reason",
    [
        ('{"messages": []}', "empty list"),
        ('{"messages": [{"role": "user", "content": "hi"}]}', "no assistant message"),
        ('{"messages": [{"role": "robot", "content": "hi"}]}', "unknown role"),
        ("not json", "not valid JSON"),
    ],
)
def test_malformed_primer_stops_with_file_line_reason_and_leaves_nothing(
    tiny_tokenizer_path, tmp_path, capsys, line, reason
):
    primer = write_primer(tmp_path / "primer.jsonl", random_chats(3, seed=1))
    assert build_primer(tmp_path, tiny_tokenizer_path, primer) == 0  # an old cache exists ...
    with open(primer, "a", encoding="utf-8") as f:
        f.write(line + "\n")
    assert build_primer(tmp_path, tiny_tokenizer_path, primer) == 1
    err = capsys.readouterr().err
    assert f"{primer}:4:" in err and reason in err
    assert not (tmp_path / "sft" / "primer").exists() or os.listdir(tmp_path / "sft" / "primer") == []


def test_missing_primer_file_stops_the_build(tiny_tokenizer_path, tmp_path, capsys):
    assert build_primer(tmp_path, tiny_tokenizer_path, tmp_path / "nope.jsonl") == 1
    assert "nope.jsonl" in capsys.readouterr().err
    assert not (tmp_path / "sft" / "primer").exists()


def test_default_paths_derive_from_cache_dir(tiny_tokenizer, tiny_tokenizer_path, tmp_path, capsys):
    cache = tmp_path / "elsewhere"
    (cache / "tokenizer").mkdir(parents=True)
    shutil.copy(tiny_tokenizer_path, cache / "tokenizer" / "spm.model")
    primer = write_primer(tmp_path / "p.jsonl", random_chats(20, seed=3))
    flags = ["--set", f"cache_dir={cache}", "--set", f"sources.primer.jsonl={primer}", "--spec", "{}"]
    assert run_cli(main, ["build-sft-primer", *flags]) == 0, capsys.readouterr().err
    assert read_meta(cache / "sft" / "primer" / "meta.json")["tokenizer_sha256"] == tiny_tokenizer.sha256
    (cache / "sft" / "primer" / "meta.json").unlink()
    assert run_cli(main, ["build-sft", "--source", "primer", *flags]) == 0, capsys.readouterr().err
    assert (cache / "sft" / "primer" / "meta.json").exists()
    assert not (tmp_path / "cache").exists()


def test_a_missing_tokenizer_names_the_default_path(tmp_path, capsys):
    primer = write_primer(tmp_path / "p.jsonl", random_chats(5, seed=3))
    argv = [
        "build-sft",
        "--source",
        "primer",
        "--set",
        f"cache_dir={tmp_path / 'c'}",
        "--set",
        f"sources.primer.jsonl={primer}",
    ]
    assert run_cli(main, [*argv, "--spec", "{}"]) == 1
    assert str(tmp_path / "c" / "tokenizer" / "spm.model") in capsys.readouterr().err
