"""niels_gpt.cache.mmap: the public name of the memory-map opener (niels_gpt.token_files.open_tokens)."""

from __future__ import annotations

import numpy as np

from niels_gpt import token_files
from niels_gpt.cache import mmap


def test_the_public_name_is_the_implementations_object():
    assert mmap.open_tokens is token_files.open_tokens and mmap.__all__ == ["open_tokens"]


def test_open_tokens_maps_a_token_file_read_only(tmp_path):
    np.arange(10, dtype="<u2").tofile(tmp_path / "t.bin")
    tokens = mmap.open_tokens(tmp_path / "t.bin")
    assert isinstance(tokens, np.memmap) and tokens.mode == "r" and tokens[3:6].tolist() == [3, 4, 5]
