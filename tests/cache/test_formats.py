"""niels_gpt.cache.formats: the public names of the token file formats (niels_gpt.token_files)."""

from __future__ import annotations

import numpy as np
import pytest

from niels_gpt import token_files
from niels_gpt.cache import formats


def test_the_public_names_are_the_implementations_objects():
    for name in formats.__all__:
        assert getattr(formats, name) is getattr(token_files, name), name


def test_the_formats_through_the_public_name(tmp_path):
    assert formats.TOKEN_DTYPE == np.dtype("<u2") and formats.OFFSET_DTYPE == np.dtype("<i8")
    formats.pack_tokens([[1, 2], [], [3]], end=9).tofile(tmp_path / "t.bin")
    assert formats.token_count(tmp_path / "t.bin") == 5
    with pytest.raises(ValueError, match="does not fit the uint16 cache format"):
        formats.check_vocab_fits(formats.MAX_VOCAB + 1)
