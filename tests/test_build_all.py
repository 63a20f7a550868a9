"""`build-all`: every cache in one process, for users without Snakemake, then `verify`."""

from __future__ import annotations

import json

import yaml

from niels_gpt.cache.cli import main
from niels_gpt.command_line import run_cli

SMALL = {
    "tokenizer": {"vocab_size": 500, "sample_chars": 120_000},
    "sources": {
        "fineweb_edu": {"max_train_tokens": 20_000, "max_val_tokens": 2_000, "val_doc_prob": 0.2},
        "wikitext": {"max_train_tokens": 20_000, "max_val_tokens": 5_000},
    },
    "sft": {"t_max": 256},
}


def test_build_all_demo_builds_every_cache_and_verifies(tmp_path, isolated_hf_cache, capsys):
    config = tmp_path / "small.yaml"
    config.write_text(yaml.safe_dump(SMALL))
    cache = tmp_path / "cache"
    rc = run_cli(main, ["build-all", "--cache-dir", str(cache), "--seed", "42", "--demo", "--config-file", str(config)])
    assert rc == 0, capsys.readouterr().err
    fineweb = json.loads((cache / "pretrain" / "fineweb_edu" / "meta.json").read_text())
    assert fineweb["train_tokens"] == 20_000 and fineweb["val_tokens"] == 2_000
    assert json.loads((cache / "pretrain" / "gutenberg" / "meta.json").read_text())["built"] is False
    for source in ("dolly15k", "oasst1", "primer"):
        assert json.loads((cache / "sft" / source / "meta.json").read_text())["train_examples"] > 0
    for stream in ("wiki", "roam", "primer"):
        assert (cache / "streams" / f"{stream}_val.bin").stat().st_size > 0
    capsys.readouterr()
    assert run_cli(main, ["verify", str(cache)]) == 0, capsys.readouterr().out
    run_readme_python_blocks(tmp_path)


def run_readme_python_blocks(workdir) -> None:
    """The README's training-script snippets run as written against a freshly built cache."""
    import os
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)\n```", readme, re.S)
    usage = blocks[0]  # the first block: reading the caches in a training script
    old = os.getcwd()
    os.chdir(workdir)
    try:
        exec(compile(usage, "README.md", "exec"), {})
    finally:
        os.chdir(old)
