"""block_causal_mask: equal to a naive double loop and to the docstring's FlexAttention mask; attention
over a packed row with it equals attention over each example alone."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F

from niels_gpt.training import attention
from niels_gpt.training.attention import block_causal_mask


def packed_segment_ids(B: int, T: int, seed: int) -> torch.Tensor:
    """Rows like a packed batch: examples 1..k of random lengths back to back, then padding (0)."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for _ in range(B):
        row, k = [], 0
        while len(row) < T and torch.rand(1, generator=g).item() < 0.9:
            k += 1
            row += [k] * int(torch.randint(1, T // 2, (1,), generator=g))
        rows.append((row + [0] * T)[:T])
    return torch.tensor(rows, dtype=torch.int32)


def test_equals_a_naive_double_loop():
    for seed, seg in enumerate([packed_segment_ids(4, 19, 0), torch.randint(0, 3, (3, 11), dtype=torch.int32)]):
        B, T = seg.shape
        want = torch.zeros((B, 1, T, T), dtype=torch.bool)
        for b in range(B):
            for t in range(T):
                for s in range(T):
                    want[b, 0, t, s] = s <= t and seg[b, s] == seg[b, t]
        got = block_causal_mask(seg)
        assert got.dtype == torch.bool and torch.equal(got, want), seed


def test_the_docstring_flex_attention_mask_is_the_same_mask():
    from torch.nn.attention.flex_attention import create_mask

    code = re.search(r"    segment_ids = batch\.segment_ids\n(.*?)\n    block_mask", attention.__doc__, re.S).group(1)
    seg = packed_segment_ids(3, 24, 1)
    namespace = {"segment_ids": seg}
    exec(compile(code.replace("\n    ", "\n"), "attention docstring", "exec"), namespace)
    flex = create_mask(namespace["same_example"], 3, None, 24, 24, device="cpu")
    assert torch.equal(flex.expand(3, 1, 24, 24), block_causal_mask(seg))


def test_attention_over_a_packed_row_equals_each_example_alone():
    torch.manual_seed(0)
    seg = packed_segment_ids(3, 32, 2)
    q, k, v = (torch.randn(3, 2, 32, 8) for _ in range(3))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=block_causal_mask(seg))
    assert not out.isnan().any()  # padding attends to itself: no empty row
    for b in range(3):
        for example in seg[b].unique().tolist():
            idx = (seg[b] == example).nonzero().squeeze(1)
            alone = F.scaled_dot_product_attention(q[b, :, idx], k[b, :, idx], v[b, :, idx], is_causal=True)
            torch.testing.assert_close(out[b, :, idx], alone)


def test_segment_ids_must_be_two_dimensional():
    with pytest.raises(ValueError, match=r"segment_ids must be \(B, T\), got shape \(5,\)"):
        block_causal_mask(torch.zeros(5, dtype=torch.int32))
