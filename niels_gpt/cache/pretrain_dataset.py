"""`PretrainTokenStreamDataset`: random (B, T) windows from a pretrain split (see niels_gpt.pretrain.dataset)."""

from niels_gpt.pretrain.dataset import PretrainTokenStreamDataset

__all__ = ["PretrainTokenStreamDataset"]
