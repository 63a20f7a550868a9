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

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)\n```", readme, re.S)
    usage = blocks[0]  # the first block: reading the caches in a training script
    old = os.getcwd()
    os.chdir(workdir)
    try:
        exec(compile(usage, "README.md", "exec"), {})
    finally:
        os.chdir(old)


def test_build_all_keeps_an_existing_tokenizer_unless_told_to_retrain(
    tmp_path, isolated_hf_cache, tiny_tokenizer_path, tiny_tokenizer, monkeypatch, capsys
):
    """The tokenizer step alone: the cache builders are replaced by stand-ins recording the model they get."""
    import shutil

    from niels_gpt.pretrain import job as pretrain_job
    from niels_gpt.sft import job as sft_job
    from niels_gpt.streams import job as streams_job

    used = []
    monkeypatch.setattr(
        pretrain_job, "build_pretrain_source", lambda cfg, s, tokenizer_path, out_dir: used.append(tokenizer_path)
    )
    monkeypatch.setattr(
        sft_job, "build_sft_source", lambda cfg, s, tokenizer_path, out_dir: {"built": False, "source": s}
    )
    monkeypatch.setattr(streams_job, "build_stream_from_config", lambda cfg, s, out: None)
    cache = tmp_path / "cache"
    (cache / "tokenizer").mkdir(parents=True)
    model = cache / "tokenizer" / "spm.model"
    shutil.copy(tiny_tokenizer_path, model)
    args = [
        "build-all",
        "--cache-dir",
        str(cache),
        "--demo",
        "--spec",
        '{"tokenizer": {"vocab_size": 450, "sample_chars": 60000}}',
    ]

    assert run_cli(main, args) == 0
    assert f"tokenizer: keeping {model} (--retrain-tokenizer to train again)" in capsys.readouterr().err
    assert (
        model.read_bytes() == open(tiny_tokenizer_path, "rb").read()
        and not (cache / "tokenizer" / "meta.json").exists()
    )
    assert used == [str(model)] * 4

    assert run_cli(main, [*args, "--retrain-tokenizer"]) == 0
    assert "keeping" not in capsys.readouterr().err
    meta = json.loads((cache / "tokenizer" / "meta.json").read_text())
    assert meta["vocab_size"] == 454 and meta["sha256"] != tiny_tokenizer.sha256
    assert meta["trained_on"]["sample_chars_cap"] == 60_000
