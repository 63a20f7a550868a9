"""Attention inside one example of a packed row: the block-causal mask.

A packed SFT row (SFTExampleDataset(packing=True)) holds several examples side by side, numbered by
`segment_ids` (B, T): 1..k for the examples, 0 for the padding at the end of the row. Causal attention
over the whole row would let an example read the ones before it; `block_causal_mask(segment_ids)` is
the boolean (B, 1, T, T) mask for `torch.nn.functional.scaled_dot_product_attention` (True = may
attend; the 1 broadcasts over heads) that lets query t attend key s only when s <= t and both belong
to the same example. The padding is one more block of its own, so every query attends at least to
itself (a query row with no allowed key would make SDPA return NaN); padding targets are ignored.
With the position ids restarting at each example, every example is computed exactly as if it were
alone in its row.

    mask = block_causal_mask(batch.segment_ids)  # (B, 1, T, T) bool
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # q, k, v: (B, heads, T, head_dim)

The mask costs B * T * T bytes (32 MB at B=32, T=1024) and SDPA with a dense mask does not skip the
masked blocks. On GPUs, FlexAttention computes the same attention from a block-sparse `BlockMask`
that skips every block outside the examples:

    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    segment_ids = batch.segment_ids

    def same_example(b, h, q_idx, kv_idx):
        return (segment_ids[b, q_idx] == segment_ids[b, kv_idx]) & (kv_idx <= q_idx)

    block_mask = create_block_mask(same_example, B, None, T, T, device="cuda")
    y = flex_attention(q, k, v, block_mask=block_mask)  # compile flex_attention for speed
"""

from __future__ import annotations

import torch


def block_causal_mask(segment_ids: torch.Tensor) -> torch.Tensor:
    """(B, 1, T, T) bool on segment_ids' device: [b, 0, t, s] is True iff s <= t and
    segment_ids[b, s] == segment_ids[b, t]."""
    if segment_ids.dim() != 2:
        raise ValueError(f"segment_ids must be (B, T), got shape {tuple(segment_ids.shape)}")
    T = segment_ids.shape[1]
    causal = torch.ones((T, T), dtype=torch.bool, device=segment_ids.device).tril()
    same = segment_ids[:, :, None] == segment_ids[:, None, :]
    return (same & causal)[:, None]
