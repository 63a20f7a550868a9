"""The demo caches in a few seconds, for tests that run what a user runs on them (train_tiny, the README's
training snippets): `build-all --demo --no-curation` with the session's tokenizer, small budgets and no byte
streams. Not curated: curation took the build from 3 s to 16 s, and with the tiny tokenizer (400 pieces) its
13-grams match so widely that it dropped most SFT train examples (primer's train split kept 3,075 tokens):
these tests are about training on caches; curation's own tests are tests/curation and build-all's."""

from __future__ import annotations

from pathlib import Path

from niels_gpt.cache.cli import main as cache_cli
from niels_gpt.command_line import run_cli

SMALL = {
    "sources.fineweb_edu.max_train_tokens": 20_000,
    "sources.fineweb_edu.max_val_tokens": 2_000,
    "sources.fineweb_edu.val_doc_prob": 0.2,
    "sources.wikitext.max_train_tokens": 20_000,
    "sources.wikitext.max_val_tokens": 5_000,
    "sources.roam.max_train_tokens": 20_000,
    "sources.roam.max_val_tokens": 5_000,
    "sft.t_max": 128,
    "streams.enabled_sources": "[]",
    "streams.required_sources": "[]",
}


def build_demo_cache(cache: Path, tokenizer_path: str) -> Path:
    """`cache`, built; the tokenizer at `tokenizer_path` is used as it is."""
    sets = [f"--set={key}={value}" for key, value in {**SMALL, "tokenizer.model_path": tokenizer_path}.items()]
    assert (
        run_cli(cache_cli, ["build-all", "--cache-dir", str(cache), "--seed", "42", "--demo", "--no-curation", *sets])
        == 0
    )
    return cache
