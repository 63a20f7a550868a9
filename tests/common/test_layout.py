"""layout.py: the one table of families and every path and file name of the cache tree."""

from __future__ import annotations

import subprocess
import sys

from niels_gpt import layout
from niels_gpt.layout import FAMILIES, REPORT_FIGURES, SHARD_GLOB, SPLITS


def test_families_are_the_one_table_of_kinds_spaces_and_units():
    assert list(FAMILIES) == ["tokenizer", "pretrain", "sft", "streams"]
    assert [(f.name, f.space, f.unit) for f in FAMILIES.values()] == [
        ("tokenizer", "model", "piece"),
        ("pretrain", "tokens", "document"),
        ("sft", "tokens", "example"),
        ("streams", "bytes", "segment"),
    ]
    assert all(name == f.name for name, f in FAMILIES.items())


def test_every_family_is_a_folder_of_the_cache_root_named_for_it():
    folders = {
        "tokenizer": layout.tokenizer_dir("c"),
        "pretrain": layout.pretrain_dir("c", "wikitext").rsplit("/", 1)[0],
        "sft": layout.sft_dir("c", "primer").rsplit("/", 1)[0],
        "streams": layout.streams_dir("c"),
    }
    assert folders == {name: f"c/{name}" for name in FAMILIES}
    assert set(REPORT_FIGURES) == {*FAMILIES, "leakage"}  # one report job per family, and the audit


def test_file_names():
    assert layout.tokenizer_model("c") == "c/tokenizer/spm.model" and layout.report_dir("c") == "c/report"
    assert layout.shard_name(12) == "shard_00012.bin" and SHARD_GLOB == "shard_*.bin"
    assert layout.part_name(3) == "part_003"
    assert layout.sft_file_names() == [
        "meta.json",
        "train_tokens.bin",
        "train_idx.npy",
        "val_tokens.bin",
        "val_idx.npy",
    ]
    assert layout.stream_bin("c/streams", "wiki", "val") == "c/streams/wiki_val.bin"
    assert layout.stream_meta("c/streams", "wiki", "val") == "c/streams/wiki_val.meta.json"
    assert layout.stream_meta_beside("c/streams/wiki_val.bin") == "c/streams/wiki_val.meta.json"
    assert layout.stream_meta_beside("c/streams/wiki_val.txt") is None
    assert SPLITS == ("train", "val")


def test_layout_is_import_light():
    """The Snakefile reads it at parse time: no numpy, no torch."""
    code = "import sys, niels_gpt.layout; print(sorted(m for m in ('numpy', 'torch') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
