"""Cache trees the loader tests read, built once with the real writers and never changed (a test that
needs to change one copies it first)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from niels_gpt.pretrain.writer import build_pretrain_cache, write_not_built_meta
from niels_gpt.sft.writer import build_sft_cache
from niels_gpt.streams.build import write_stream
from tests.support.chats import random_chats
from tests.support.corpus import tiny_corpus

PRETRAIN_SOURCES = ("fineweb_edu", "wikitext", "gutenberg")
SFT_SOURCES = ("primer", "oasst1", "dolly15k")
# ~4,000 train tokens per source in 2 kB shards (several shards each) and a val split; documents in
# input order (no shuffle buffer), encoded in this process
SMALL_PRETRAIN = {"max_train_tokens": 4_000, "max_val_tokens": 500, "shard_bytes": 2_000, "val_doc_prob": 0.1}
IN_ORDER = {"seed": 0, "shuffle_buffer": None, "num_threads": 1}


@pytest.fixture(scope="session")
def loader_caches(tiny_tokenizer, tmp_path_factory) -> Path:
    """{root}/pretrain/{PRETRAIN_SOURCES} (tiny_corpus(40, seed=k)) and pretrain/roam, not built ("disabled in
    config"); {root}/sft/{SFT_SOURCES} (random_chats(30, seed=k), val_frac 0.1)."""
    root = tmp_path_factory.mktemp("loader_caches")
    for k, name in enumerate(PRETRAIN_SOURCES):
        out = str(root / "pretrain" / name)
        build_pretrain_cache(tiny_corpus(40, seed=k), out, tokenizer=tiny_tokenizer, **SMALL_PRETRAIN, **IN_ORDER)
    roam = str(root / "pretrain" / "roam")
    write_not_built_meta(
        roam, reason="disabled in config", dataset_name=None, dataset_config=None, seed=0, shard_bytes=2_000
    )
    for k, name in enumerate(SFT_SOURCES):
        out = str(root / "sft" / name)
        build_sft_cache(random_chats(30, seed=k), out, tokenizer=tiny_tokenizer, val_frac=0.1, seed=0, source=name)
    return root


@pytest.fixture(scope="session")
def packable_caches(tiny_tokenizer, tmp_path_factory) -> Path:
    """{root}/sft/dolly15k and sft/oasst1: 60 and 80 short chats (at most 12 words a message), so a row of
    32 tokens packs several examples."""
    root = tmp_path_factory.mktemp("packable_caches")
    for k, name in enumerate(("dolly15k", "oasst1")):
        chats = random_chats(60 + 20 * k, seed=k, max_words=12)
        build_sft_cache(chats, str(root / "sft" / name), tokenizer=tiny_tokenizer, val_frac=0.1, seed=0, source=name)
    return root


STREAM_SIZES = {"wiki": 3_000, "roam": 1_200, "primer": 500}  # bytes of random train streams


@pytest.fixture(scope="session")
def stream_caches(tmp_path_factory) -> Path:
    """A streams folder with the train streams of STREAM_SIZES (random bytes, the real stream writer)."""
    root = tmp_path_factory.mktemp("stream_caches")
    rng = np.random.default_rng(0)
    for name, size in STREAM_SIZES.items():
        write_stream(root, name, "train", rng.integers(0, 256, size, dtype=np.uint8).tobytes(), {})
    return root
