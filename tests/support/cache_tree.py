"""A small cache tree laid out like `cache/`, built with the real writers, for verify/info/inspect tests."""

from __future__ import annotations

import shutil
from pathlib import Path

from niels_gpt.cache.meta import write_meta
from niels_gpt.layout import FORMAT_VERSION
from niels_gpt.pretrain.writer import build_pretrain_cache, write_not_built_meta
from niels_gpt.sft.writer import build_sft_cache
from niels_gpt.streams import write_stream
from tests.support.chats import random_chats
from tests.support.corpus import tiny_corpus

KNOWN_CHAT = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "hello there"},
    {"role": "assistant", "content": "general kenobi"},
    {"role": "user", "content": "and then?"},
    {"role": "assistant", "content": "the river\nopens"},
]
STREAM_TEXT = "Ünïcødé stream text ✓\n\n" + "\n\n".join(tiny_corpus(20, seed=7))
PRETRAIN_DOCS = tiny_corpus(60, seed=3)


def install_tokenizer(root: Path, model_path: str, tokenizer) -> None:
    """Copy a model to {root}/tokenizer/spm.model with the meta.json fields tokenizer_job writes."""
    (root / "tokenizer").mkdir(parents=True, exist_ok=True)
    shutil.copy(model_path, root / "tokenizer" / "spm.model")
    write_meta(
        str(root / "tokenizer" / "meta.json"),
        {
            "kind": "tokenizer",
            "format_version": FORMAT_VERSION,
            "model_file": "spm.model",
            "sha256": tokenizer.sha256,
            "vocab_size": tokenizer.vocab_size,
            "special_token_ids": tokenizer.special_ids,
        },
    )


def build_tree(tmp_path: Path, tokenizer, model_path: str) -> Path:
    """cache/{tokenizer, pretrain/x (3+ shards, budget-cut), pretrain/off (not built), sft/y, streams/wiki_*}."""
    root = tmp_path / "cache"
    install_tokenizer(root, model_path, tokenizer)
    loader_counts = {"boilerplate_books_stripped": 2, "boilerplate_chars_removed": 345}  # as gutenberg records them
    build_pretrain_cache(
        iter(["  \n", *PRETRAIN_DOCS[:5], "", *PRETRAIN_DOCS[5:]]),  # two blank documents, skipped
        str(root / "pretrain" / "x"),
        provenance={"source": "x", "stream": {"cleaning": loader_counts}},
        tokenizer=tokenizer,
        max_train_tokens=2500,
        max_val_tokens=None,
        shard_bytes=2000,
        seed=0,
        shuffle_buffer=None,
        val_doc_prob=0.2,
        num_threads=1,
    )
    write_not_built_meta(
        str(root / "pretrain" / "off"),
        reason="sources.off.enabled is false",
        dataset_name="off",
        dataset_config=None,
        seed=0,
        shard_bytes=2000,
    )
    long_prompt = [{"role": "user", "content": "the river " * 100}, {"role": "assistant", "content": "yes"}]
    chats = [KNOWN_CHAT] + random_chats(30, seed=5) + [long_prompt] * 4  # head truncation at 64 drops these
    build_sft_cache(chats, str(root / "sft" / "y"), tokenizer=tokenizer, val_frac=0.2, seed=0, t_max=64, source="y")
    half = len(STREAM_TEXT) // 2
    for split, text in (("train", STREAM_TEXT[:half]), ("val", STREAM_TEXT[half:])):
        write_stream(root / "streams", "wiki", split, text.encode("utf-8"), {"source": "wiki", "split": split})
    return root
