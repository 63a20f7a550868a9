"""niels_gpt.cache.build_cache: the public names of the cache builders, and `Message`."""

from __future__ import annotations

from typing import get_type_hints

import numpy as np

from niels_gpt.cache import build_cache
from niels_gpt.pretrain import writer as pretrain_writer
from niels_gpt.sft import writer as sft_writer


def test_the_public_names_are_the_writers_objects():
    assert build_cache.build_pretrain_cache is pretrain_writer.build_pretrain_cache
    assert build_cache.build_pretrain_cache_presplit is pretrain_writer.build_pretrain_cache_presplit
    assert build_cache.build_sft_cache is sft_writer.build_sft_cache
    assert set(get_type_hints(build_cache.Message)) == {"role", "content"}


def test_messages_build_an_sft_cache_through_the_public_name(tiny_tokenizer, tmp_path):
    chat: list[build_cache.Message] = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]
    meta = build_cache.build_sft_cache([chat] * 3, str(tmp_path), tokenizer=tiny_tokenizer, val_frac=0.0, seed=0)
    assert meta["train_examples"] == 3 and len(np.load(tmp_path / "train_idx.npy")) == 3
