"""expected.py: the artifacts a config builds, and the command that (re)builds one."""

from __future__ import annotations

from pathlib import Path

from niels_gpt.config import prepare_config
from niels_gpt.inspection.expected import build_command, builds_here, expected_meta_paths


def test_the_default_config_expects_every_source_and_both_splits_of_each_enabled_stream():
    cfg = prepare_config({"streams": {"enabled_sources": ["wiki", "primer"], "required_sources": ["wiki"]}})
    got = [p.as_posix() for p in expected_meta_paths(cfg, "cache")]
    assert got == [
        "cache/tokenizer/meta.json",
        "cache/pretrain/fineweb_edu/meta.json",
        "cache/pretrain/wikitext/meta.json",
        "cache/pretrain/gutenberg/meta.json",  # disabled: a "not built" record is still written
        "cache/pretrain/roam/meta.json",
        "cache/sft/dolly15k/meta.json",
        "cache/sft/oasst1/meta.json",
        "cache/sft/primer/meta.json",
        "cache/streams/wiki_train.meta.json",
        "cache/streams/wiki_val.meta.json",
        "cache/streams/primer_train.meta.json",
        "cache/streams/primer_val.meta.json",
    ]


def test_the_command_names_the_meta_json_and_the_config_its_folder_needs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = prepare_config({})  # cache_dir: cache
    assert build_command("cache/sft/primer/meta.json", "cache", cfg, force=False) == (
        "snakemake cache/sft/primer/meta.json"
    )
    assert build_command(Path("cache/pretrain/roam/meta.json"), "cache", cfg, force=True) == (
        "snakemake -f cache/pretrain/roam/meta.json"
    )
    assert build_command("cache-demo/tokenizer/meta.json", "cache-demo", cfg, force=True) == (
        "snakemake -f cache-demo/tokenizer/meta.json --config demo=true"
    )
    assert build_command("/data/c/sft/x/meta.json", "/data/c", cfg, force=False) == (
        "snakemake /data/c/sft/x/meta.json --config cache_dir=/data/c"
    )
    mine = prepare_config({"cache_dir": "/data/c"})  # config.yaml names that folder: nothing to add
    assert build_command("/data/c/sft/x/meta.json", "/data/c", mine, force=False) == "snakemake /data/c/sft/x/meta.json"


def test_only_the_trees_this_config_builds_are_held_to_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = prepare_config({"cache_dir": "elsewhere"})
    assert builds_here(cfg, "cache") and builds_here(cfg, "cache-demo") and builds_here(cfg, tmp_path / "elsewhere")
    assert not builds_here(cfg, tmp_path / "other" / "cache")
