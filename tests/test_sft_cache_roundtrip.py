"""Cache roundtrip: an SFT cache written from a fixed list of examples reads back as uint16 tokens with
valid int64 offsets, and every example it holds is exactly the tokenization of the input example."""

from __future__ import annotations

import numpy as np

from niels_gpt.cache.build_cache import build_sft_cache
from niels_gpt.chat_template import render_chat_sft
from niels_gpt.splits import val_mask
from tests.support.chats import random_chats

CHATS = random_chats(120, seed=11)


def test_tokens_parse_as_uint16_and_offsets_are_valid(tiny_tokenizer, tmp_path):
    build_sft_cache(CHATS, str(tmp_path), tokenizer=tiny_tokenizer, val_frac=0.2, seed=42)
    for split in ("train", "val"):
        raw = (tmp_path / f"{split}_tokens.bin").read_bytes()
        assert len(raw) % 2 == 0
        tokens = np.frombuffer(raw, dtype="<u2")
        assert int(tokens.max()) < tiny_tokenizer.vocab_size
        idx = np.load(tmp_path / f"{split}_idx.npy")
        assert idx.dtype == np.dtype("<i8") and idx.ndim == 1 and len(idx) > 0
        assert idx[0] == 0 and bool((np.diff(idx) > 0).all()) and idx[-1] < len(tokens)


def test_reconstructed_sequences_equal_the_tokenization_of_the_input(tiny_tokenizer, tmp_path):
    meta = build_sft_cache(CHATS, str(tmp_path), tokenizer=tiny_tokenizer, val_frac=0.2, seed=42)
    is_val = val_mask(len(CHATS), 0.2, 42)
    for split, want_val in (("train", False), ("val", True)):
        tokens = np.fromfile(tmp_path / f"{split}_tokens.bin", dtype="<u2")
        bounds = [*np.load(tmp_path / f"{split}_idx.npy").tolist(), len(tokens)]
        got = [tokens[a:b].tolist() for a, b in zip(bounds[:-1], bounds[1:])]
        expected = [render_chat_sft(tiny_tokenizer, c)[0] for c, v in zip(CHATS, is_val) if v == want_val]
        assert got == expected
        assert meta["splits"][split]["num_examples"] == len(expected)
        assert meta["splits"][split]["num_tokens"] == sum(map(len, expected))
