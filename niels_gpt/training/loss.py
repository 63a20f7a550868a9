"""The project's training loss: cross-entropy over the loss-active targets of a batch.

`masked_cross_entropy(logits, shift_labels)` scores position t's logits against `shift_labels[:, t]` (the
dict batch's already-shifted targets; y_masked of an SFT batch, y of a pretrain or byte batch) and
averages over the targets that are not `ignore_index` (-100). The logits are cast to float32 first,
as transformers' causal-LM loss does, so the two agree for a model in any dtype. A batch whose every
target is ignored gives NaN (0 / 0), as torch and transformers do; the SFT readers never build such a row.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from niels_gpt.chat_template import IGNORE_INDEX


def masked_cross_entropy(logits: torch.Tensor, shift_labels: torch.Tensor, ignore_index: int = IGNORE_INDEX):
    """Mean cross-entropy of `logits` (B, T, V) against `shift_labels` (B, T) over the targets that are not
    `ignore_index`, in float32: a 0-dim tensor."""
    if logits.shape[:-1] != shift_labels.shape:
        raise ValueError(
            f"logits (B, T, V) and shift_labels (B, T) must agree, got {tuple(logits.shape)} and "
            f"{tuple(shift_labels.shape)}"
        )
    return F.cross_entropy(logits.float().flatten(0, 1), shift_labels.flatten(), ignore_index=ignore_index)
