"""Acceptance: `get_batch` over three tiny byte sources (T=16, B=8): shapes (B, T), int64, values
0..255, y is x shifted by one, the same generator seed gives the same batch, and it fails fast on
probabilities not summing to 1, a key of p missing from the sources or the other way round, and
sources shorter than T+1 (listing each). The rest of the batcher: tests/streams/test_batches.py."""

from __future__ import annotations

import pytest
import torch

from niels_gpt.batching import get_batch
from tests.support.streams import byte_sources

T, B = 16, 8
P = {"wiki": 0.5, "roam": 0.3, "primer": 0.2}


@pytest.fixture
def sources():
    return byte_sources()


def test_shapes_dtype_and_bytes_above_127_stay_positive(sources):
    utf8 = {**sources, "primer": "ünïcødé ✓ ".encode() * 20}  # every byte of a multi-byte character is >= 128
    x, y = get_batch(utf8, p={"wiki": 0.0, "roam": 0.0, "primer": 1.0}, B=B, T=T, device="cpu")
    assert x.shape == y.shape == (B, T)
    assert x.dtype == y.dtype == torch.int64
    assert x.is_contiguous() and y.is_contiguous()
    assert int(x.max()) > 127 and int(x.min()) >= 32  # uint8 values, not int8: no negative byte
    assert all(bytes(row) in utf8["primer"] for row in x.tolist())


def test_y_is_x_shifted_by_one(sources):
    x, y = get_batch(sources, p=P, B=64, T=T, device="cpu", generator=torch.Generator().manual_seed(1))
    assert torch.equal(y[:, :-1], x[:, 1:])


def test_same_generator_state_gives_same_batch(sources):
    x1, y1 = get_batch(sources, p=P, B=B, T=T, device="cpu", generator=torch.Generator().manual_seed(0))
    x2, y2 = get_batch(sources, p=P, B=B, T=T, device="cpu", generator=torch.Generator().manual_seed(0))
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    x3, _ = get_batch(sources, p=P, B=B, T=T, device="cpu", generator=torch.Generator().manual_seed(1))
    assert not torch.equal(x1, x3)


def test_probabilities_must_sum_to_one(sources):
    with pytest.raises(ValueError, match="sum to 1"):
        get_batch(sources, p={"wiki": 0.5, "roam": 0.3, "primer": 0.1}, B=B, T=T, device="cpu")


def test_missing_key_in_p_raises(sources):
    with pytest.raises(ValueError, match=r"missing from p: \['primer'\]"):
        get_batch(sources, p={"wiki": 0.5, "roam": 0.5}, B=B, T=T, device="cpu")


def test_extra_key_in_p_raises(sources):
    with pytest.raises(ValueError, match=r"not available: \['books'\]"):
        get_batch(sources, p={**P, "wiki": 0.4, "books": 0.1}, B=B, T=T, device="cpu")


def test_too_short_sources_are_all_listed(sources):
    short = {**sources, "roam": b"0123456789", "primer": b"x" * T}
    with pytest.raises(ValueError) as e:
        get_batch(short, p=P, B=B, T=T, device="cpu")
    msg = str(e.value)
    assert "roam: 10 bytes" in msg and f"primer: {T} bytes" in msg and "wiki" not in msg
