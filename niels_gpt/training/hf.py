"""The Hugging Face view of a dict batch: the keyword arguments of a transformers causal LM whose
`loss` is the project's masked cross-entropy (training/loss.py) on the same rows.

    out = model(**hf_inputs(batch, model))   # batch: a dict batch (training/batch_dict.py)
    out.loss == masked_cross_entropy(out.logits, batch["shift_labels"])

What the model is given:
  input_ids     the batch's input_ids;
  labels        UNSHIFTED, transformers' convention: labels[:, t] is input_ids[:, t] when that token is a
                loss-active target, else -100, so labels[:, 0] is -100. The model shifts them itself (logits
                at t are scored against labels[:, t + 1]); never pass already-shifted targets as `labels`;
  shift_labels  the same targets already shifted (shift_labels[:, t] is the target of position t), the
                row's last target included. transformers' causal-LM loss uses them as they are when given
                (`labels` must still be non-None for a loss to be computed), so the loss counts all T
                targets of every row, like the project's; with `shift_labels=False` it counts T-1 (the
                last position has no label to shift in). Loss in float32, mean over targets that are not -100;
  position_ids  0..T-1, or for packed rows restarting at 0 at every example;
  use_cache     False: a training forward keeps no key/value cache (and transformers detects packed
                rows from position_ids only without one).
Packed rows (the batch has segment_ids) must not attend across examples. Two ways, both checked on CPU
against every example computed alone (tests/training/test_hf.py):
  packed_mask="position_ids" (default): no attention_mask; transformers (>= 4.54) splits each row where
      position_ids do not step by 1 and masks across the pieces (sdpa, eager; flash-attention's varlen path
      reads the same position_ids). A 2-D attention_mask or a cache switches that detection off silently;
  packed_mask="4d": attention_mask is `additive_block_mask(segment_ids, dtype)`, (B, 1, T, T) in the model's
      dtype, 0 where `block_causal_mask` allows attention and the dtype's minimum elsewhere; it replaces the
      causal mask. A boolean 4-D mask is right for sdpa but is added to the scores by eager attention (leaks).
The Hugging Face Trainer takes a MixedBatches mixture as `train_dataset=mix.rows()` with
`data_collator=RowCollator(mix.B)` and `per_device_train_batch_size=mix.B` (every step one whole mixed batch;
its loss is masked_cross_entropy, and the Trainer counts the targets from shift_labels). `RowCollator`
refuses another number of rows with one message.
transformers is not imported here: the package imports without it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from importlib import metadata

import torch

from niels_gpt.training.attention import block_causal_mask

PACKED_MASKS = ("position_ids", "4d")
PACKED_POSITION_IDS_SINCE = (4, 54)  # first transformers release that splits packed rows by position_ids


def additive_block_mask(segment_ids: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """(B, 1, T, T) in `dtype`: 0 where a query may attend a key (same example, key not later), the
    dtype's minimum elsewhere: the 4-D attention_mask transformers adds to the attention scores."""
    allowed = block_causal_mask(segment_ids)
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill_(~allowed, torch.finfo(dtype).min)


@functools.lru_cache(maxsize=1)
def transformers_version() -> str | None:
    """The installed transformers version, None without it; looked up once (a lookup costs about 1 ms)."""
    try:
        return metadata.version("transformers")
    except metadata.PackageNotFoundError:
        return None


def _check_position_ids_packing() -> None:
    """Refuse a transformers too old to split packed rows by position_ids (it would attend across them)."""
    version = transformers_version()
    if version is None:
        return
    if tuple(int(part) for part in version.split(".")[:2] if part.isdigit()) < PACKED_POSITION_IDS_SINCE:
        raise ValueError(
            f"transformers {version} does not split packed rows by position_ids (4.54 does); install "
            "transformers>=4.54, or pass packed_mask='4d'"
        )


def hf_inputs(
    batch: Mapping[str, torch.Tensor],
    model=None,
    *,
    packed_mask: str = "position_ids",
    dtype: torch.dtype | None = None,
    shift_labels: bool = True,
) -> dict:
    """Keyword arguments for a transformers causal LM (`model(**hf_inputs(batch, model))`), as the module
    docstring says. `model` (or `dtype`) gives the 4-D mask's dtype (default float32); `shift_labels=False`
    leaves shift_labels out, for a model whose forward does not pass them to its loss."""
    if packed_mask not in PACKED_MASKS:
        raise ValueError(f"packed_mask must be one of {PACKED_MASKS}, got {packed_mask!r}")
    missing = [key for key in ("input_ids", "labels", "position_ids") if key not in batch]
    if shift_labels and "shift_labels" not in batch:
        missing.append("shift_labels")
    if missing:
        raise ValueError(
            f"not a dict batch: no {', '.join(missing)} (it has {', '.join(batch) or 'nothing'}); "
            "make one with niels_gpt.training.batch_dict.as_dict or Batch.as_dict()"
        )
    inputs = {
        "input_ids": batch["input_ids"],
        "labels": batch["labels"],
        "position_ids": batch["position_ids"],
        "use_cache": False,
    }
    if shift_labels:
        inputs["shift_labels"] = batch["shift_labels"]
    segment_ids = batch.get("segment_ids")
    if segment_ids is not None:
        if packed_mask == "4d":
            dtype = dtype or getattr(model, "dtype", None) or torch.float32
            inputs["attention_mask"] = additive_block_mask(segment_ids, dtype)
        else:
            _check_position_ids_packing()
    return inputs


class RowCollator:
    """The Trainer's `data_collator` for `MixedBatches.rows()`: B rows (mixture.Row) -> `hf_inputs` of their
    batch (`packed_mask`, `dtype`, `shift_labels` as hf_inputs takes them)."""

    def __init__(self, B: int, *, packed_mask: str = "position_ids", dtype: torch.dtype | None = None):
        if packed_mask not in PACKED_MASKS:
            raise ValueError(f"packed_mask must be one of {PACKED_MASKS}, got {packed_mask!r}")
        self.B, self.packed_mask, self.dtype = B, packed_mask, dtype

    def __call__(self, rows) -> dict:
        if len(rows) != self.B:
            raise ValueError(
                f"got {len(rows)} rows, but a batch of this mixture has B={self.B}: set "
                f"per_device_train_batch_size={self.B} (every step trains on one whole mixed batch)"
            )
        fields = [getattr(row, "fields", row) for row in rows]
        batch = {key: torch.stack([f[key] for f in fields]) for key in fields[0]}
        return hf_inputs(batch, packed_mask=self.packed_mask, dtype=self.dtype)
